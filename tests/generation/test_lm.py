"""covlib.generation on the embedded SmolLM2-135M-Instruct: decoding, sampling, stop strings, cache, resume, and its input
rules (changed weights, empty prompts, a lone stop string, decoding values, missing model folders)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from covlib import generation as lm_mod
from covlib.generation import decoding
from covlib import nli
from offline_models import minilm_tokenizer_dir
from covlib import retrieval as R
from covlib.core.cache import Cache, make_key

PROMPTS = [
    "Question: What is the capital of France?\nAnswer:",
    "Question: Who wrote the play Hamlet?\nAnswer:",
    "Question: What is the largest planet in the solar system?\nAnswer:",
    "Question: In which country is the city of Kyoto?\nAnswer:",
]


@pytest.fixture(scope="module")
def model_dir():
    return lm_mod.embedded_model_dir()


@pytest.fixture
def lm(model_dir, tmp_path):
    return lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"), batch_size=4)


def test_embedded_model_converted_once(model_dir):
    assert (model_dir / "model.safetensors").exists()
    assert lm_mod.embedded_model_dir() == model_dir  # second call reuses the safetensors copy


def test_greedy_batch_equals_one_at_a_time(lm, tmp_path):
    batched = [c[0].text for c in lm.generate(PROMPTS, max_new_tokens=12, chat=True, progress=False)]
    single_lm = lm_mod.LM(cache=Cache(tmp_path / "other.sqlite", table="lm"), batch_size=1)
    single = [single_lm.generate([p], max_new_tokens=12, chat=True, progress=False)[0][0].text for p in PROMPTS]
    assert batched == single
    assert "Paris" in batched[0]


def test_completion_fields_and_stop_strings(lm):
    comps = lm.generate(PROMPTS[:2], max_new_tokens=40, stop=["\n", "."], progress=False)
    for (c,) in comps:
        assert "\n" not in c.text and "." not in c.text
        assert len(c.tokens) == len(c.token_logprobs)
        assert all(lp <= 0 for lp in c.token_logprobs)
        assert c.finish_reason == "stop"
    (long,) = lm.generate(["Write a long story about a dragon."], max_new_tokens=5, chat=True, progress=False)[0:1]
    assert long[0].finish_reason == "length" and len(long[0].tokens) == 5


@pytest.mark.slow
def test_sampling_is_seeded_and_independent_of_batch(lm):
    kw = dict(n=5, temperature=0.7, max_new_tokens=16, progress=False)
    a = lm.generate(PROMPTS[:1], seed=1, **kw)[0]
    lm.cache.clear()
    b = lm.generate([PROMPTS[2], PROMPTS[0], PROMPTS[1]], seed=1, **kw)[1]
    assert [c.text for c in a] == [c.text for c in b]
    assert len({c.text for c in a}) > 1  # five paths, not five copies
    c = lm.generate(PROMPTS[:1], seed=2, **kw)[0]
    assert [x.text for x in c] != [x.text for x in a]


@pytest.mark.slow
def test_second_run_is_served_from_cache(lm):
    first = lm.generate(PROMPTS, n=3, temperature=0.7, max_new_tokens=10, progress=False)
    calls = lm.forward_calls
    again = lm.generate(PROMPTS, n=3, temperature=0.7, max_new_tokens=10, progress=False)
    assert lm.forward_calls == calls
    assert [[c.text for c in cs] for cs in again] == [[c.text for c in cs] for cs in first]
    lm.generate(PROMPTS, n=3, temperature=0.9, max_new_tokens=10, progress=False)  # new decoding -> new key
    assert lm.forward_calls > calls


def test_score_prefers_the_right_answer(lm):
    good, bad = lm.score(["The capital of France is"] * 2, [" Paris", " banana"], progress=False)
    assert good > bad
    calls = lm.forward_calls
    assert lm.score(["The capital of France is"], [" Paris"], progress=False) == [good]
    assert lm.forward_calls == calls


def test_chat_template_is_applied(lm):
    rendered = lm.render("Hi there", chat=True)
    assert rendered.startswith("<|im_start|>") and rendered.endswith("<|im_start|>assistant\n")
    assert lm.render("Hi there", chat=False) == "Hi there"


def test_bad_input_is_refused(lm):
    with pytest.raises(TypeError):
        lm.generate("a single string", progress=False)
    with pytest.raises(ValueError, match="exceeds the model's context"):
        lm.generate(["word " * 9000], max_new_tokens=8, progress=False)
    with pytest.raises(ValueError, match="2 prompts but 1 continuations"):
        lm.score(["a", "b"], ["c"], progress=False)


@pytest.mark.slow
def test_killed_run_resumes_from_cache(model_dir, tmp_path, monkeypatch):
    """A run killed mid-way keeps every finished batch; the rerun generates only the rest."""
    db = tmp_path / "calls.sqlite"
    prompts = [f"Question: What is {i} plus {i}?\nAnswer:" for i in range(8)]
    script = textwrap.dedent(
        f"""
        from covlib.generation import LM
        from covlib.core.cache import Cache
        lm = LM(cache=Cache({str(db)!r}, table="lm"), batch_size=1)
        lm.generate({prompts!r}, max_new_tokens=48, progress=False)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    cache = Cache(db, table="lm")
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if db.exists() and len(cache) >= 2:
            proc.kill()
            break
        time.sleep(0.05)
    proc.wait()
    done_before = len(cache)
    assert 2 <= done_before < len(prompts), "the child should be killed part-way through"

    resumed = lm_mod.LM(cache=cache, batch_size=1)
    decoded = []
    original = decoding.decode
    monkeypatch.setattr(decoding, "decode", lambda lm, texts, *a: decoded.extend(texts) or original(lm, texts, *a))
    out = resumed.generate(prompts, max_new_tokens=48, progress=False)
    assert len(decoded) == len(prompts) - done_before  # nothing generated twice
    fresh = lm_mod.LM(cache=Cache(tmp_path / "fresh.sqlite", table="lm"), batch_size=1)
    assert [c[0].text for c in out] == [c[0].text for c in fresh.generate(prompts, max_new_tokens=48, progress=False)]


def test_local_model_overwritten_gets_fresh_completions(tmp_path):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from covlib.generation import LM, embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    folder = tmp_path / "tiny-llama"

    def write_weights(seed: int) -> None:
        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128)
        LlamaForCausalLM(config).save_pretrained(folder)
        tok.save_pretrained(folder)

    cache = Cache(tmp_path / "calls.sqlite", table="lm")
    write_weights(0)
    first = LM(str(folder), cache=cache, device="cpu").generate(["Hello there"], max_new_tokens=8, progress=False)
    write_weights(1)
    retrained = LM(str(folder), cache=cache, device="cpu")
    again = retrained.generate(["Hello there"], max_new_tokens=8, progress=False)
    assert retrained.forward_calls > 0, "new weights under the same folder were served the old cached text"
    assert again[0][0].tokens != first[0][0].tokens
    same = LM(str(folder), cache=cache, device="cpu")
    assert same.generate(["Hello there"], max_new_tokens=8, progress=False) == again and same.forward_calls == 0


def test_empty_prompt_is_refused_and_nothing_cached(lm):
    before = len(lm.cache)
    for prompts in (["", "The capital of Italy is"], [""]):
        with pytest.raises(ValueError, match="prompt 0 is empty"):
            lm.generate(prompts, max_new_tokens=8, progress=False)
    assert len(lm.cache) == before
    assert lm.generate(["\n"], max_new_tokens=4, progress=False)[0][0].tokens  # whitespace is a token: fine


def test_a_lone_stop_string_acts_as_a_one_item_list(lm):
    prompt = ["Question: What is the capital of France?\nAnswer: Paris.\nQuestion: What is the capital of Italy?\nAnswer:"]
    as_string = lm.generate(prompt, max_new_tokens=24, stop="Question:", progress=False)[0][0]
    as_list = lm.generate(prompt, max_new_tokens=24, stop=["Question:"], progress=False)[0][0]
    assert as_string == as_list and len(as_string.text) > 3


def test_non_finite_decoding_values_and_non_text_prompts_are_refused(lm):
    from covlib.generation import check_prompts
    from tests.scripted import ScriptedGenerator

    for kwargs in ({"temperature": float("nan")}, {"temperature": float("inf")}, {"top_p": float("nan")}):
        with pytest.raises(ValueError, match="finite temperature"):
            lm.generate(["Hi"], progress=False, **kwargs)
    with pytest.raises(ValueError, match=r"prompt 1 is not valid Unicode text \(surrogates not allowed"):
        lm.generate(["fine", "lone \ud800 surrogate"], progress=False)
    with pytest.raises(TypeError, match="prompt 0 is NoneType, not str"):
        lm.generate([None], progress=False)
    with pytest.raises(TypeError, match="continuation 0 is int"):
        lm.score(["a"], [3], progress=False)
    with pytest.raises(TypeError, match="stop must be a string or a list of strings"):
        lm.generate(["Hi"], stop=[None], progress=False)
    with pytest.raises(ValueError, match="prompt 0 is empty"):  # the tests' scripted generator keeps the same rules
        ScriptedGenerator({}).generate([""])
    assert check_prompts(np.array(["a", "b"]), "generate") == ["a", "b"]  # any iterable of strings
    assert make_key(prompt="\ud800") != make_key(prompt="\ud801")  # the cache key itself never crashes
    with pytest.raises(ValueError, match=r"probabilities\(\): hypothesis 0 is not valid Unicode"):
        nli.probabilities(["a"], ["\ud800"], judge="overlap")
    with pytest.raises(TypeError, match=r"top_sentences_batch\(\) takes a list of queries"):
        R.top_sentences_batch("q", [["a."]])


def test_missing_local_model_folder_is_not_a_hub_lookup(tmp_path):
    from covlib.generation import LM

    with pytest.raises(FileNotFoundError, match="does not exist, and it is not a hub id"):
        LM(str(tmp_path / "models" / "mine"))


def test_the_keys_a_trace_records_fetch_exactly_the_cached_calls(lm):
    from covlib.generation import call_keys, score_keys

    prompts = ["Q: What is the capital of France?\nA:", "Q: Who wrote Hamlet?\nA:"]
    decoding = dict(n=3, temperature=0.7, max_new_tokens=6, stop=["\n"], seed=4)
    sampled = lm.generate(prompts, progress=False, **decoding)
    keys = call_keys(lm, prompts, **decoding)
    assert [len(k) for k in keys] == [3, 3]
    assert [[lm.cache.get(k)["text"] for k in ks] for ks in keys] == [[c.text for c in cs] for cs in sampled]
    greedy = call_keys(lm, prompts, max_new_tokens=6)
    assert [len(k) for k in greedy] == [1, 1] and greedy[0][0] not in keys[0], "greedy and sampled calls differ"
    values = lm.score(prompts, [" Paris", " Shakespeare"], progress=False)
    assert [lm.cache.get(k) for k in score_keys(lm, prompts, [" Paris", " Shakespeare"])] == values


def test_the_embedded_model_has_one_spelling():
    """`EMBEDDED` ('') is the embedded model; the old aliases ('embedded', 'default') are read as what they look
    like (a hub id), not as the embedded model, and nothing is downloaded until a call needs the weights."""
    from covlib import generation

    assert generation.EMBEDDED == "" and generation.load_lm(generation.EMBEDDED) is generation.load_lm()
    assert generation.load_lm().name == generation.EMBEDDED_NAME
    for alias in ("embedded", "default"):
        assert generation.load_lm(alias).name == alias != generation.EMBEDDED_NAME


def test_decoding_on_cuda_leaves_out_cudnns_attention_and_a_cpu_keeps_torchs_choice():
    """cuDNN's SDPA backend plans anew for every key length, i.e. every step and layer (issue 36: 64% of a step's CPU
    time on an H200); decoding and scoring on CUDA restrict SDPA to the other backends, a CPU is left as it is."""
    from torch.nn.attention import SDPBackend

    from covlib.generation import decoding

    backends = decoding.attention_backends("cuda:0")
    assert SDPBackend.CUDNN_ATTENTION not in backends and SDPBackend.MATH in backends
    assert decoding.attention_backends("cpu") is None
    with decoding.attention_context("cpu"):
        pass


def test_a_rows_text_grown_a_token_at_a_time_is_the_whole_decode():
    """`RowText` decodes only the tokens since the last whole character; for the embedded tokenizer it must give what
    decoding everything gives, after every token: on real text, on characters split across byte tokens (emoji, CJK,
    accents) and on random ids (stray bytes, special tokens). A tokenizer of another kind decodes everything."""
    import random

    from transformers import AutoTokenizer

    from covlib.generation import embedded_model_dir
    from covlib.generation.sampling import RowText

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    texts = ["First, Paris is the capital of France. The answer is Paris.\n\nQ:", "Zürich — 東京 🚀🇫🇷 naïve café",
             " a  b\t\n\n  c ..", "<|im_end|> plain <|im_start|>"]
    rng = random.Random(0)
    rows = [tok(t, add_special_tokens=False).input_ids for t in texts]
    rows += [[rng.randrange(len(tok)) for _ in range(60)] for _ in range(30)]
    rows += [[rng.randrange(256) for _ in range(60)] for _ in range(30)]  # the byte tokens: many split characters
    for row in rows:
        grown, ids = RowText(tok), []
        assert grown.incremental
        for token in row:
            ids.append(token)
            assert grown.text(ids) == tok.decode(ids, skip_special_tokens=True), (row, len(ids))
    minilm = AutoTokenizer.from_pretrained(minilm_tokenizer_dir())
    assert not RowText(minilm).incremental


def test_completions_with_stop_strings_are_the_same_decoded_a_token_at_a_time_or_whole(tmp_path, monkeypatch):
    """Sampled and greedy completions cut at stop strings: the incremental text (`RowText`) and decoding everything at
    every step (the code before) give the same texts, tokens, log-probabilities and finish reasons."""
    from covlib.core.cache import Cache
    from covlib.generation import sampling

    prompts = ["Q: Who wrote Hamlet?\nA: First,", "Q: What is 2 + 2?\nA:", "List three colours:\n1.", "Bonjour! Écris"]
    decoding = dict(n=3, temperature=0.9, max_new_tokens=24, stop=["\n\n", ".", "Q:"], seed=0, progress=False)

    def run(name):
        lm = lm_mod.LM(cache=Cache(tmp_path / f"{name}.sqlite", table="lm"), batch_size=4)
        return lm.generate(prompts, **decoding) + lm.generate(prompts, max_new_tokens=16, stop=[" the"], progress=False)

    grown = run("grown")
    monkeypatch.setattr(sampling.RowText, "text", lambda self, ids: self.tok.decode(ids, skip_special_tokens=True))
    whole = run("whole")
    assert grown == whole and any(c.finish_reason == "stop" for row in grown for c in row)
