"""The recorder a run's plan makes its calls on (covlib.generation.recording): the model's own keys and tokens, no
weights read, placeholder replies."""

from __future__ import annotations

import pytest

from covlib import data, generation
from covlib.generation import decoder, loading, recording
from covlib.papers import credibility
from covlib.papers.verify_edit import cot, prompts


@pytest.fixture
def no_weights(monkeypatch):
    """Fail the test if a model's weights are read."""
    def refuse(*args, **kwargs):
        pytest.fail("a model's weights were read")

    monkeypatch.setattr(loading, "load_model", refuse)
    monkeypatch.setattr(decoder, "load_model", refuse)


def test_a_chat_prompt_is_rendered_and_keyed_without_the_weights(no_weights):
    lm = decoder.LM(None)
    rendered = lm.render("Who wrote Hamlet?", chat=True)
    assert rendered.startswith("<|im_start|>") and "Who wrote Hamlet?" in rendered
    assert lm.cache_keys(["Who wrote Hamlet?"], chat=True, max_new_tokens=8)


def test_the_recorder_keys_a_call_as_the_model_does_and_answers_with_placeholders(no_weights):
    rec, lm = recording.recorder("", device="cpu"), generation.load_lm("")
    questions = ["Who wrote Hamlet?", "Where is Paris?"]
    out = rec.generate(questions, n=3, temperature=0.7, max_new_tokens=20, chat=True, seed=1, desc="answers")
    assert rec.calls[0].keys == lm.cache_keys(questions, n=3, temperature=0.7, max_new_tokens=20, chat=True, seed=1)
    assert [len(o) for o in out] == [3, 3] and all(recording.FILLER in c.text for o in out for c in o)
    rows, own, shared, _ = rec.calls[0].cost(set())
    tokens = [len(lm.tokenizer(lm.render(q, True), add_special_tokens=False).input_ids) for q in questions]
    assert rows == 6 and shared > 0 and own + 2 * shared == sum(tokens)  # each prompt once, its shared start once
    assert rec.calls[0].cost({k for ks in rec.calls[0].keys for k in ks})[0] == 0  # all done: nothing left to run
    rec.score(["The answer is"], [" Paris."], desc="score")
    assert rec.calls[1].keys == [lm.score_keys(["The answer is"], [" Paris."])]


def test_an_adapter_not_trained_yet_gets_keys_of_the_plans_own_the_same_in_every_notebook(tmp_path):
    folder = str(tmp_path / "adapters" / "10-smoke-qa-only")
    first, second = recording.recorder("", folder), recording.recorder("", folder)
    first.generate(["Q: x\nA:"], max_new_tokens=4)
    second.generate(["Q: x\nA:"], max_new_tokens=4)
    base = recording.recorder("")
    base.generate(["Q: x\nA:"], max_new_tokens=4)
    assert first.keyer is None and first.calls[0].keys == second.calls[0].keys != base.calls[-1].keys
    assert first.calls[0].cost(set())[1] is not None  # the base model's tokenizer counts its tokens


def test_a_served_model_is_keyed_but_its_tokens_are_unknown():
    rec = recording.recorder("openai:m@http://127.0.0.1:9/v1")
    rec.generate(["Hello"], max_new_tokens=4, chat=True)
    assert rec.calls[0].keys == rec.keyer.cache_keys(["Hello"], max_new_tokens=4, chat=True)
    assert rec.calls[0].cost(set())[:3] == (1, None, None)


def test_the_shared_start_tokenised_apart_gives_the_tokens_of_the_whole(shared_data):
    rec = recording.recorder("")
    questions = data.load_adv_hotpotqa(split="test")[:12]
    shots = cot.fewshot_examples("hotpotqa")
    header = prompts.verifying_answer_header("hotpotqa")
    chat = [rec.render(credibility.answer_prompt(ex.question, ex.paragraphs[:3]), True) for ex in questions]
    for texts in ([cot.cot_prompt(ex.question, "hotpotqa", shots) for ex in questions],
                  [prompts.verifying_answer_prompt(ex.question, [ex.paragraphs[0].text], "hotpotqa", header)
                   for ex in questions], chat):
        assert recording.split_at(texts, rec.tokenizer) > recording.MIN_SPLIT or texts is chat
        call = recording.Call("generate", "x", "", 1, [[t] for t in texts], texts, rec.tokenizer)
        assert call.ids(texts) == rec.tokenizer(texts, add_special_tokens=False).input_ids


def test_a_script_shapes_replies_and_bounds_by_the_calls_desc():
    rec = recording.recorder("")
    script = recording.Script(replies={"verify": lambda r, p, t, s: "false"}, bounds={"verify (round 1": "at most"})
    with rec.playing(script):
        assert rec.generate(["x y"], desc="verify (round 1)")[0][0].text == "false"
        rec.generate(["x y"], desc="answer")
    assert [c.bound for c in rec.calls] == ["at most", ""] and rec.script.replies == {}
