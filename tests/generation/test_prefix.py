"""One prefill for the prompts' shared few-shot block (covlib.generation.prefix): the same completions, seeds and scores as
prefilling each prompt whole, for fewer prefilled tokens."""

from __future__ import annotations

import random

import pytest

from covlib import data
from covlib import generation as lm_mod
from covlib.core.cache import Cache
from covlib.generation.prefix import MIN_SHARED_TOKENS, SharedPrefix, common_prefix
from covlib.papers.verify_edit import cot


def test_common_prefix_leaves_every_sequence_a_token_of_its_own():
    assert common_prefix([[1, 2, 3, 4], [1, 2, 3, 5]]) == 3
    assert common_prefix([[1, 2, 3], [1, 2, 3, 4]]) == 2  # the shorter one keeps its last token
    assert common_prefix([[1, 2, 3], [1, 2, 3, 4]], keep=0) == 3
    assert common_prefix([[7, 2], [1, 2]]) == 0
    assert common_prefix([]) == 0


def test_common_prefix_is_what_every_sequence_shares_read_from_the_first_and_last_in_order():
    rng = random.Random(0)
    for _ in range(300):
        seqs = [[rng.randint(0, 2) for _ in range(rng.randint(1, 6))] for _ in range(rng.randint(1, 5))]
        limit, n = min(map(len, seqs)) - 1, 0
        while n < limit and len({s[n] for s in seqs}) == 1:
            n += 1
        assert common_prefix(seqs) == max(n, 0), seqs


def test_a_prefix_is_shared_only_between_two_or_more_long_enough_prompts():
    block = list(range(100, 100 + MIN_SHARED_TOKENS))
    assert SharedPrefix.of([block + [1], block + [2]]).ids == block
    assert SharedPrefix.of([block + [1]]) is None  # one prompt: nothing to share
    assert SharedPrefix.of([block[:-1] + [1], block[:-1] + [2]]) is None  # too short to pay for itself


def _last_logits(model, **args):
    import torch

    with torch.inference_mode():
        return model(**args, use_cache=True, logits_to_keep=1).logits[:, -1].float()


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_rows_after_a_shared_prefix_see_what_they_would_see_alone(tmp_path, attention):
    import torch

    lm = lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"))
    lm.model.set_attn_implementation(attention)
    block = lm.tokenizer("Q: Which river flows through Paris?\nA: The Seine. So the answer is the Seine.\n\n").input_ids
    seqs = [block + lm.tokenizer("Q: Who wrote Hamlet?\nA:").input_ids, block + lm.tokenizer("Q: Why?\nA:").input_ids]
    shared = SharedPrefix(block)
    args, extra, offset = shared.batch(lm.engine, seqs)
    n, width = len(block), max(len(s) for s in seqs) - len(block)
    assert args["input_ids"].shape == (2, width)  # only the rows' own tokens run
    assert args["position_ids"][:, -1].tolist() == [len(s) - 1 for s in seqs]  # numbered after the prefix
    if attention == "sdpa":  # cascade: the prefix's keys are read once for all rows; a row's cache holds its own tokens
        assert shared.cascade and offset == n and len(extra["prefix_kv"]) == lm.model.config.num_hidden_layers
        assert args["attention_mask"].shape == (2, width) and args["cache"] is None  # `cache=`: transformers 5.40 drops the old name
        assert "past_key_values" not in args
    else:  # an attention cascade was not checked against: each row gets a copy of the prefix's cache
        assert not shared.cascade and offset == 0 and extra == {}
        assert args["attention_mask"].shape == (2, n + width)
    alone = torch.cat([_last_logits(lm.model, input_ids=torch.tensor([s])) for s in seqs])
    assert torch.allclose(_last_logits(lm.model, **args), alone, atol=2e-3)


@pytest.fixture(scope="module")
def cot_prompts():
    shots = cot.fewshot_examples("hotpotqa", None)
    return [cot.cot_prompt(e.question, "hotpotqa", shots) for e in data.load_adv_hotpotqa(split="test")[:3]]


def _pair(tmp_path, batch_size=4):
    """Two embedded LMs over separate caches, one prefilling the shared block once, one prefilling each prompt whole."""
    out = []
    for share in (True, False):
        lm = lm_mod.LM(cache=Cache(tmp_path / f"share-{share}.sqlite", table="lm"), batch_size=batch_size)
        lm.share_prefix = share
        out.append(lm)
    return out


def _prefilled_tokens(lm):
    """Count the tokens the model's forward passes take in (decode steps take one per row)."""
    model, forward, seen = lm.model, lm.model.forward, [0]

    def counting(*args, **kwargs):
        seen[0] += int(kwargs["input_ids"].numel())
        return forward(*args, **kwargs)

    model.forward = counting
    return seen


@pytest.mark.slow
def test_greedy_cot_is_identical_with_one_prefill_of_the_few_shot_block(tmp_path, cot_prompts):
    shared, whole = _pair(tmp_path, batch_size=2)
    n_shared, n_whole = _prefilled_tokens(shared), _prefilled_tokens(whole)
    kw = dict(max_new_tokens=16, stop=list(cot.COT_STOP), progress=False)
    a, b = shared.generate(cot_prompts, **kw), whole.generate(cot_prompts, **kw)
    assert [c[0].text for c in a] == [c[0].text for c in b]
    assert [c[0].tokens for c in a] == [c[0].tokens for c in b]
    assert [c[0].logprob for c in a] == pytest.approx([c[0].logprob for c in b], abs=1e-3)
    # the ~460-token block went through the model once, not once per prompt
    assert n_shared[0] < n_whole[0] - 2 * 400


@pytest.mark.slow
def test_sampled_paths_follow_their_seeds_with_or_without_sharing(tmp_path, cot_prompts):
    shared, whole = _pair(tmp_path)
    kw = dict(n=3, temperature=0.7, seed=4, max_new_tokens=12, stop=list(cot.COT_STOP), progress=False)
    a, b = shared.generate(cot_prompts[:2], **kw), whole.generate(cot_prompts[:2], **kw)
    assert [[c.text for c in cs] for cs in a] == [[c.text for c in cs] for cs in b]
    alone = whole.__class__(cache=Cache(tmp_path / "alone.sqlite", table="lm"))
    assert [c.text for c in alone.generate(cot_prompts[1:2], **kw)[0]] == [c.text for c in a[1]]


@pytest.mark.slow
def test_scores_after_a_shared_prefix_match_whole_prompt_scores(tmp_path, cot_prompts):
    shared, whole = _pair(tmp_path, batch_size=3)
    conts = [" Paris.", " the United States.", " 1994."]
    n_shared, n_whole = _prefilled_tokens(shared), _prefilled_tokens(whole)
    a = shared.score(cot_prompts, conts, progress=False)
    b = whole.score(cot_prompts, conts, progress=False)
    assert a == pytest.approx(b, abs=1e-3)
    assert n_shared[0] < n_whole[0] - 2 * 400


def test_sharing_is_on_by_default_and_an_environment_variable_turns_it_off(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "calls.sqlite", table="lm")
    assert lm_mod.LM(cache=cache).share_prefix
    monkeypatch.setenv("COVLIB_SHARE_PREFIX", "0")
    assert not lm_mod.LM(cache=cache).share_prefix


def test_rows_with_long_own_parts_keep_fused_attention_and_the_usual_batch(tmp_path):
    lm = lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"))
    block = list(range(100, 100 + MIN_SHARED_TOKENS + 4))
    # an instruction, then ten reference paragraphs of its own per prompt (notebook 05): cascade would hold
    # every row's own scores unfused, in 4x the rows
    long_own = SharedPrefix.of([block + list(range(1000, 1300)), block + list(range(2000, 2290))])
    assert long_own.longest_own == 300 and not long_own.prepare(lm.engine).cascade
    assert long_own.rows(16) == 16
    few_shot = SharedPrefix.of([block * 3 + [5, 6], block * 3 + [7]])  # a question after a few-shot block
    assert few_shot.prepare(lm.engine).cascade and few_shot.rows(16) == 64


def _whole_logprob(lm, prompt: str, continuation: str) -> float:
    """The continuation's log-probability from one forward over prompt + continuation, the model called directly."""
    import torch

    p = lm.tokenizer(prompt, add_special_tokens=False).input_ids
    c = lm.tokenizer(continuation, add_special_tokens=False).input_ids
    with torch.inference_mode():
        logp = torch.log_softmax(lm.model(input_ids=torch.tensor([p + c])).logits[0].float(), dim=-1)
    return sum(float(logp[len(p) - 1 + j, t]) for j, t in enumerate(c))


def test_an_llm_judge_prefills_each_prompt_once_for_its_three_options(tmp_path):
    from covlib.nli.judges import LLMJudge

    lm = lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"), batch_size=4)
    judge = LLMJudge(lm)
    premises = ["The Eiffel Tower, completed in 1889, stands on the Champ de Mars in Paris.",
                "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
                "The Nile flows north through eleven countries before reaching the Mediterranean Sea."]
    hypotheses = ["The Eiffel Tower is in Rome.", "Marie Curie won two Nobel Prizes.", "The Nile is in South America."]
    prompts = [judge.prompt(p, h) for p, h in zip(premises, hypotheses)]
    seen = _prefilled_tokens(lm)
    judge.probabilities(premises, hypotheses)
    longest = max(len(lm.tokenizer(p, add_special_tokens=False).input_ids) for p in prompts)
    option_tokens = [len(lm.tokenizer(o, add_special_tokens=False).input_ids) for o in judge.options]
    # each prompt once (padded to the longest), then each option's tokens but its last: not one prefill per option
    assert seen[0] <= len(prompts) * longest + len(prompts) * len(option_tokens) * (max(option_tokens) - 1)
    stored = lm.score([p for p in prompts for _ in judge.options], [o for _ in prompts for o in judge.options], progress=False)
    alone = [_whole_logprob(lm, p, o) for p in prompts for o in judge.options]
    assert stored == pytest.approx(alone, abs=1e-3)


@pytest.mark.slow
def test_several_continuations_after_a_shared_prefix_score_as_each_would_alone(tmp_path, cot_prompts):
    lm = lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"), batch_size=2)
    conts = [" Paris.", " the United States of America.", " 1994."]
    prompts = [p for p in cot_prompts for _ in conts]
    seen = _prefilled_tokens(lm)
    scores = lm.score(prompts, conts * len(cot_prompts), progress=False)
    assert seen[0] < sum(len(lm.tokenizer(p, add_special_tokens=False).input_ids) for p in cot_prompts)  # block once
    assert scores == pytest.approx([_whole_logprob(lm, p, c) for p, c in zip(prompts, conts * 3)], abs=1e-3)


BLOCK = ("Answer each quiz question with a short phrase and a full stop. The questions come from a general-knowledge "
         "quiz about places, people and dates; answer from what you know, and do not explain the answer.\n\n")


@pytest.mark.parametrize("path", ["no prefix", "copied prefix", "cascade"])
def test_continuations_of_several_tokens_score_as_one_whole_forward_does(tmp_path, path):
    from covlib.generation.prefix import CASCADE

    lm = lm_mod.LM(cache=Cache(tmp_path / "calls.sqlite", table="lm"), batch_size=2)
    lm.share_prefix = path != "no prefix"
    if path == "copied prefix":  # an attention cascade was not checked against: each batch copies the prefix's cache
        lm.model.set_attn_implementation("eager")
    prompts = [BLOCK + "Q: What is the capital of France?\nA:",
               BLOCK + "Q: In which country did the D-Day landings of June 1944 take place?\nA:"]
    conts = [" Paris.", " the United States of America.", " in 1994.", " France"]
    rows = []
    forward = lm.model.forward

    def recording(*args, **kwargs):
        rows.append(int(kwargs["input_ids"].shape[0]))
        return forward(*args, **kwargs)

    lm.model.forward = recording
    scores = lm.score([p for p in prompts for _ in conts], conts * 2, progress=False)
    lm.model.forward = forward
    assert (lm.model.config._attn_implementation == CASCADE) == (path == "cascade")
    assert max(rows) <= 2  # continuation rows come batch_size at a time, however many a prompt has
    assert scores == pytest.approx([_whole_logprob(lm, p, c) for p in prompts for c in conts], abs=1e-3)
