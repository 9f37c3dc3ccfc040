"""A run's plan (covlib.runs.plan, `make reproduce PLAN=1`): each notebook's model calls, made by its paper's own
methods on the profile's questions through a recorder (no model loaded), tokenised and keyed as the model would be;
its time at the rates `make bench` measured; repeated and cached calls free; the plan beside a run's times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from covlib import data, generation, retrieval
from covlib.core import paths
from covlib.generation import loading, recording
from covlib.generation import spec as model_spec
from covlib.papers import covrag, credibility, verify_edit
from covlib.papers.covrag.notebook import NOTEBOOKS as COVRAG
from covlib.papers.credibility import prompts as credibility_prompts
from covlib.papers.credibility.notebook import NOTEBOOKS as CREDIBILITY
from covlib.papers.verify_edit.notebook import NOTEBOOKS as VERIFY_EDIT
from covlib.runs import plan
from covlib.runs.project import NOTEBOOKS as PROJECT

pytestmark = pytest.mark.usefixtures("isolated_cache")  # what the call cache holds is free: start from none

SPECS = {spec["name"]: spec for table in (PROJECT, VERIFY_EDIT, CREDIBILITY, COVRAG) for spec in table.values()}
WITH_WORK = [name for name, spec in SPECS.items() if spec.get("work")]


def test_the_notebooks_that_run_a_model_declare_their_work():
    idle = {"00_data_tour", "12_claims"}  # retrieval and statistics alone
    assert set(SPECS) - set(WITH_WORK) == idle


@pytest.mark.parametrize("name", WITH_WORK)
def test_each_notebooks_work_grows_from_smoke_to_cpu_to_full_and_loads_no_weights(name, monkeypatch):
    monkeypatch.setattr(loading, "load_model", lambda *a, **k: pytest.fail("the plan loaded a model's weights"))
    monkeypatch.setattr(recording, "local_tokenizer", lambda model_id: None)  # rows alone: full's tokens take minutes
    rows = {}
    for profile in ("smoke", "cpu", "full"):
        work, _ = plan.work_of(SPECS[name], profile, "", "cpu")
        assert work and all(w.rows > 0 and w.kind in plan.KINDS and w.step for w in work), (name, profile)
        rows[profile] = sum(w.rows for w in work)
    assert rows["smoke"] <= rows["cpu"] <= rows["full"] and rows["smoke"] < rows["full"], (name, rows)


def test_a_call_an_earlier_notebook_made_is_counted_once():
    alone = plan.make([SPECS["02_threshold_ablation"]], "cpu", "", "cpu", plan.REFERENCE_RATES["cpu"])
    after = plan.make([SPECS["01_consistency_kde"], SPECS["02_threshold_ablation"]], "cpu", "", "cpu",
                      plan.REFERENCE_RATES["cpu"])
    steps = lambda p: [w.step for w in p.work["02_threshold_ablation"]]  # noqa: E731
    assert "CoT-SC hotpotqa n=5" in steps(alone) and "CoT-SC hotpotqa n=5" not in steps(after)
    assert after.seconds("02_threshold_ablation") < alone.seconds("02_threshold_ablation")
    n = after.work["01_consistency_kde"][0]
    assert (n.rows, n.new) == (60 * 5, 96)  # cpu: 60 questions x 5 paths of at most 96 tokens
    assert n.shared > 400 and n.prompt < 60 * 60  # the 6-shot block prefilled once, each question's own part once


def test_seconds_follow_the_rates_and_a_model_of_another_size_is_scaled():
    w = plan.Work("x", "s", "generate", rows=10, prompt=200, new=30, shared=100, longest=20)
    r = plan.Rates("test", decode_tok_s=100.0, prefill_tok_s=1000.0, judge_pairs_s=50.0)
    assert r.seconds(w) == pytest.approx((100 + 200) / 1000 + 10 * 30 / 100)
    assert r.seconds(plan.Work("x", "s", "judge", rows=100)) == pytest.approx(2.0)
    assert r.seconds(plan.Work("x", "s", "train", rows=10, prompt=1000)) == pytest.approx(3 * 1000 / 1000)
    assert r.seconds(plan.Work("x", "s", "generate", rows=10, prompt=None, new=30, shared=None)) is None
    measured = {"source": "bench", "shapes": {"smollm2": {"parameters": 10, "decode_tok_s": 100.0,
                                                          "prefill_tok_s": 1000.0}}, "judge_pairs_s": 5.0}
    local = plan.rates_for("", "cpu", measured)
    assert "scaled from the smollm2 shape" in local.note  # the embedded model's 135M against a 10-parameter shape
    assert local.decode_tok_s == pytest.approx(100.0 * 10 / plan.model_parameters(""))
    served = plan.rates_for("openai:m@http://127.0.0.1:9/v1", "cpu", measured)
    assert served.decode_tok_s is None and "served" in served.note
    p = plan.make([SPECS["01_consistency_kde"], SPECS["12_claims"]], "cpu", "openai:m@http://127.0.0.1:9/v1", "cpu",
                  measured)
    assert p.seconds("01_consistency_kde") is None and "| 300 / 60 / 0 / 0 | ? |" in plan.table(p)  # rows, no tokens
    assert plan.table(p).splitlines()[-1] == "| all | | | | ? |"  # a total over unknown rows is unknown
    simulated = plan.make([SPECS["01_consistency_kde"]], "cpu", "sim:paper", "cpu", measured)
    assert simulated.seconds("01_consistency_kde") == pytest.approx(plan.OVERHEAD_SECONDS)  # no model work to time
    assert "simulated model" in simulated.rates().note


def test_rates_are_read_per_device_and_a_damaged_file_falls_back_to_the_reference(tmp_path):
    path = tmp_path / "bench_rates.json"
    assert plan.read_rates("cpu", path) is plan.REFERENCE_RATES["cpu"]
    assert plan.read_rates("cuda", path) is plan.REFERENCE_RATES["cuda"]  # an H200's, until make bench ran here
    assert plan.read_rates("mps", path)["shapes"] == {}
    entry = {"source": "make bench", "device": "cuda", "shapes": {"7b": {"parameters": 6_700_000_000,
                                                                        "decode_tok_s": 1700.0, "prefill_tok_s": 9e4}}}
    path.write_text(json.dumps({"cuda": entry}))
    assert plan.read_rates("cuda:0", path) == entry and plan.read_rates("cpu", path) is plan.REFERENCE_RATES["cpu"]
    path.write_text("{not json")
    assert plan.read_rates("cuda", path) is plan.REFERENCE_RATES["cuda"]


def test_the_table_puts_actual_minutes_beside_the_prediction():
    p = plan.make([SPECS["01_consistency_kde"], SPECS["11_covrag_judge"]], "cpu", "", "cpu", plan.REFERENCE_RATES["cpu"])
    entries = [{"notebook": "01_consistency_kde", "profile": "cpu", "model": "embedded", "device": "cpu",
                "seconds": 120.0}, {"notebook": "01_consistency_kde", "profile": "smoke", "model": "embedded",
                                    "device": "cpu", "seconds": 5.0}]
    actual = plan.actual_seconds(entries, p)
    assert actual == {"01_consistency_kde": 120.0}
    text = plan.table(p, actual)
    row = next(line for line in text.splitlines() if line.startswith("| 01_consistency_kde"))
    predicted = p.seconds("01_consistency_kde")
    assert f"| {predicted / 60:.1f} | 2.0 | {120 / predicted:.2f} |" in row
    assert f"| timed (1 of 2) | | | | {predicted / 60:.1f} | 2.0 | {120 / predicted:.2f} |" in text  # like for like
    assert "| 11_covrag_judge |" in text and text.splitlines()[-1].startswith("| all |")
    assert "predicted" in plan.describe(p) and "reference machine" in plan.describe(p)


def test_make_reproduce_plan_prints_the_plan_and_runs_nothing(tmp_path):
    env = {"COVLIB_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "COVLIB_DATA": str(paths.data_dir()), "COVLIB_MODELS": str(paths.models_dir())}  # the questions it plans
    out = subprocess.run([sys.executable, str(paths.code_root() / "scripts" / "reproduce.py"), "--plan", "--profile",
                          "cpu", "--only", "01,10"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| 01_consistency_kde | 300 / 60 / 0 / 0 |" in out.stdout and "10_covrag_finetune" in out.stdout
    assert not (tmp_path / "results" / "run_times.json").exists()  # nothing ran, nothing recorded


class Counting:
    """The embedded model, each call first recorded as the plan records its own (rows, tokens, keys), then run."""

    def __init__(self) -> None:
        self.lm, self.rec = generation.load_lm(""), recording.recorder("", device="cpu")
        self.name = self.lm.name

    def generate(self, prompts, **kw):
        self.rec.generate(prompts, **kw)
        return self.lm.generate(prompts, **kw)

    def score(self, prompts, continuations, **kw):
        self.rec.score(prompts, continuations, **kw)
        return self.lm.score(prompts, continuations, **kw)


def by_step(calls) -> dict:
    """Per step, in order: rows, tokens prefilled, max_new_tokens, cache keys, whether the plan says it is a bound."""
    out = {}
    for c in calls:
        rows, own, shared, _ = c.cost(set())
        r, t, _, keys, bound = out.get(c.step, (0, 0, 0, set(), False))
        out[c.step] = (r + rows, t + own + shared, c.new, keys | {k for ks in c.keys for k in ks},
                       bound or bool(c.bound) or c.placeholder)
    return out


def run_02(lm, v):
    """Notebook 02's calls: CoT-SC, then every question edited with its knowledge source."""
    questions = data.load_adv_hotpotqa(split="test")[:v["n_questions"]]
    run = verify_edit.run_cot_sc(lm, questions, "hotpotqa", n=v["n_samples"], temperature=v["temperature"],
                                 seed=v["seed"], max_new_tokens=v["max_new_tokens"])
    source = verify_edit.make_knowledge(v["knowledge"], corpus=data.default_corpus(), corpus_name="hotpot-corpus")
    verify_edit.compute_edits(lm, run, questions, "hotpotqa", source, max_threshold=v["n_samples"] + 1,
                              consistency=v["consistency"])


def run_06(lm, v):
    """Notebook 06's calls: closed book, partial and complete references."""
    questions = credibility.load_questions(v["questions"], v["n_questions"], v["seed"])
    sets = {"closed-book": [credibility.closed_book(ex) for ex in questions],
            "partial": [credibility.partial(ex, v["n_refs"], v["seed"]) for ex in questions],
            "complete": [credibility.with_gold(ex, v["n_refs"], v["seed"]) for ex in questions]}
    credibility.answer_runs([lm], questions, sets, max_new_tokens=v["max_new_tokens"])


def run_09(lm, v):
    """Notebook 09's calls: closed-book answers, then CoV-RAG with its rounds."""
    loaded = covrag.load_datasets(sizes=v["sizes"], seed=v["seed"])
    questions = [ex for name in v["datasets"] if name in loaded for ex in loaded[name]]
    covrag.closed_book_batch(lm, [ex.question for ex in questions], v["max_new_tokens"], v["chat"])
    covrag.cov_rag(lm, questions, retrieval.open_corpus("")[1], k=v["k"], max_rounds=v["max_rounds"],
                   thresholds=v["thresholds"], max_new_tokens=v["max_new_tokens"], verify_tokens=v["verify_tokens"],
                   chat=v["chat"])


SMALLER = {"02_threshold_ablation": {"n_questions": 2}, "06_knowledge_recall": {"n_questions": 2},
           "09_covrag_iterations": {"sizes": {"NQ": 1, "WebQ": 1}}}


@pytest.mark.slow  # the embedded model runs each notebook's calls: minutes on a cold call cache (make test only)
@pytest.mark.parametrize("name, run", [("02_threshold_ablation", run_02), ("06_knowledge_recall", run_06),
                                       ("09_covrag_iterations", run_09)])
def test_the_plan_makes_the_calls_a_real_smoke_run_makes(name, run):
    """One notebook a paper at its smoke settings (fewer questions, to be quick), planned and then run on the embedded
    model: the same steps; exact ones equal in rows, tokens prefilled, max_new_tokens and cache keys, bounded ones
    at least the run's."""
    v = {**plan.values_of(SPECS[name], "smoke", "", "cpu"), **SMALLER[name]}
    record = plan.Recorders("cpu")
    SPECS[name]["work"](v, record)
    planned = by_step(record("").calls)
    real = Counting()
    run(real, v)
    ran = by_step(real.rec.calls)
    print(f"\n{name}: step: planned (rows, tokens, new) / ran")
    for step, (rows, tokens, new, keys, bound) in planned.items():
        got = ran.get(step, (0, 0, new, set(), False))
        print(f"  {step}: {(rows, tokens, new)} / {got[:3]}{' (bound)' if bound else ''}")
        assert new == got[2], step
        if bound:
            assert rows >= got[0] and tokens >= got[1], (step, (rows, tokens), got[:2])
        else:
            assert (rows, tokens, keys) == got[:2] + (got[3],), step
    assert set(ran) <= set(planned) and [s for s in planned if s in ran] == list(ran)  # no call unplanned, in order


def test_a_prompt_edit_moves_the_plan(monkeypatch, isolated_cache):
    def prefilled(name: str, kind: str) -> int:
        work = plan.make([SPECS[name]], "smoke", "", "cpu", plan.REFERENCE_RATES["cpu"]).work[name]
        return sum(w.tokens()[0] for w in work if w.kind == kind)

    extra = " Write whole sentences, and cite every reference you use."
    before = prefilled("04_credibility_models", "generate")
    monkeypatch.setattr(credibility_prompts, "ANSWER_INSTRUCTION", credibility_prompts.ANSWER_INSTRUCTION + extra)
    tokens = len(recording.local_tokenizer(generation.LM(None).model_id)(extra, add_special_tokens=False).input_ids)
    assert prefilled("04_credibility_models", "generate") - before == 8 * tokens  # smoke: 8 answers, each its words
    vq = verify_edit.prompts.VQ_PROMPTS
    before = prefilled("02_threshold_ablation", "generate")
    monkeypatch.setitem(vq, "hotpotqa", vq["hotpotqa"].replace("Write a question", "Write one short, plain question"))
    assert prefilled("02_threshold_ablation", "generate") > before  # the verifying questions' template


def test_a_call_the_call_cache_holds_costs_nothing(isolated_cache):
    def closed_book() -> plan.Work:
        work = plan.make([SPECS["09_covrag_iterations"]], "smoke", "", "cpu", plan.REFERENCE_RATES["cpu"])
        return next(w for w in work.work["09_covrag_iterations"] if w.step == "closed-book answer")

    before = closed_book()
    v = plan.values_of(SPECS["09_covrag_iterations"], "smoke", "", "cpu")
    first = covrag.load_datasets(sizes=v["sizes"], seed=v["seed"])["NQ"][:2]
    covrag.closed_book_batch(generation.load_lm(""), [ex.question for ex in first], v["max_new_tokens"], v["chat"])
    after = closed_book()
    assert (before.rows, after.rows) == (8, 6) and after.tokens()[0] < before.tokens()[0]


def test_a_plan_converts_and_writes_no_model(tmp_path, monkeypatch):
    """A fresh clone: the embedded model not converted yet. The plan reads its shape as data and its tokenizer from
    the GGUF file, the same tokens as the converted model's, and writes nothing under the models folder."""
    converted = loading.load_tokenizer(generation.EMBEDDED_MODEL)  # the converted model's (make env made it)
    monkeypatch.setenv("COVLIB_MODELS", str(tmp_path / "models"))
    recording.local_tokenizer.cache_clear()
    try:
        p = plan.make([SPECS["01_consistency_kde"]], "smoke", "", "cpu", plan.REFERENCE_RATES["cpu"])
        from_gguf = recording.local_tokenizer(generation.EMBEDDED_MODEL)
    finally:
        recording.local_tokenizer.cache_clear()
    assert not (tmp_path / "models").exists()  # nothing converted, nothing written
    assert p.seconds("01_consistency_kde") is not None and "estimated" not in plan.describe(p)
    text = "Q: Which magazine was started first, Arthur's Magazine or First for Women?\nA: Let's think step by step."
    assert from_gguf(text).input_ids == converted(text).input_ids


def no_hub(monkeypatch) -> None:
    """Fail the test where a config is asked for other than from files on this machine."""
    from transformers import AutoConfig

    local = AutoConfig.from_pretrained

    def from_pretrained(source, *args, **kw):
        if not (kw.get("local_files_only") or Path(str(source)).is_dir()):
            pytest.fail(f"the plan asked the hub for {source}")
        return local(source, *args, **kw)

    monkeypatch.setattr(AutoConfig, "from_pretrained", from_pretrained)


def test_the_papers_models_are_priced_offline_without_asking_the_hub(monkeypatch):
    """The full profile's models (every paper's): their sizes are data and their tokens the embedded tokenizer's
    estimate, so a plan is complete without the hub, which it does not ask."""
    no_hub(monkeypatch)
    models = {**credibility.PAPER_MODELS, **covrag.PAPER_MODELS}
    assert len(set(models.values())) == 8
    for hub_id in models.values():
        r = plan.rates_for(hub_id, "cuda", plan.REFERENCE_RATES["cuda"])
        assert r.decode_tok_s and r.prefill_tok_s, hub_id
    assert plan.rates_for("huggyllama/llama-13b", "cuda", plan.REFERENCE_RATES["cuda"]).decode_tok_s == \
        pytest.approx(1948.1 * 6_677_598_208 / 13_015_864_320)
    p = plan.make([SPECS["01_consistency_kde"]], "smoke", "lmsys/vicuna-7b-v1.3", "cpu", plan.REFERENCE_RATES["cpu"])
    assert p.seconds("01_consistency_kde") is not None and "?" not in plan.table(p)
    assert "tokens estimated with the embedded model's tokenizer (theirs is not on this machine): " \
           "lmsys/vicuna-7b-v1.3" in plan.describe(p)


def test_an_unknown_hub_model_is_not_asked_for_where_the_hub_cannot_be_reached(monkeypatch):
    no_hub(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model_spec.hub_reachable.cache_clear()
    try:
        assert plan.model_parameters("someone/some-model-7b") is None
        note = plan.rates_for("someone/some-model-7b", "cpu", plan.REFERENCE_RATES["cpu"]).note
        assert "the hub cannot be reached (HF_HUB_OFFLINE" in note
    finally:
        model_spec.hub_reachable.cache_clear()


def test_make_reproduce_plans_a_gpu_run_on_a_machine_without_one(tmp_path):
    env = {"COVLIB_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "COVLIB_DATA": str(paths.data_dir()), "COVLIB_MODELS": str(paths.models_dir()), "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, str(paths.code_root() / "scripts" / "reproduce.py"), "--plan", "--profile",
                          "smoke", "--device", "cuda", "--only", "01"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "device cuda" in out.stdout and "from an NVIDIA H200" in out.stdout  # whose rates, said
    assert "| 01_consistency_kde | 60 / 12 / 0 / 0 |" in out.stdout


def test_offline_a_hub_model_on_this_machine_is_sized_from_its_cached_config(tmp_path):
    """HF_HUB_OFFLINE=1 (a GPU cluster's usual setting) with the model downloaded before: its config is read from the
    hub's cache on this machine, not left unknown."""
    from transformers import LlamaConfig

    snapshot = tmp_path / "hub" / "models--someone--tiny-llama" / "snapshots" / "abc"
    LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                vocab_size=1000).save_pretrained(snapshot)
    (tmp_path / "hub" / "models--someone--tiny-llama" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny-llama" / "refs" / "main").write_text("abc")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"),
           "PYTHONPATH": str(paths.code_root())}
    out = subprocess.run([sys.executable, "-c", "from covlib.runs import plan; "
                          "print(plan.model_parameters('someone/tiny-llama'))"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == 2 * 1000 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
