"""Input rules of the NLI judges (covlib.nli): empty pairs, lone strings, judge specs that cannot load."""

from __future__ import annotations

import time

import pytest

from covlib import nli


def test_empty_hypothesis_or_premise_is_neutral(isolated_cache):
    assert nli.entailment_labels(["Paris is in France."], [""], progress=False) == ["neutral"]
    probs = nli.probabilities(["", "  "], ["Paris is in France.", "x"], progress=False)
    assert probs.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    # the overlap heuristic's rule (judge=None is the trained judge once `make judge` built it)
    assert nli.entailment_labels(["Paris is in France."], ["It is."], judge="overlap", progress=False) == ["neutral"]


def test_lone_strings_and_non_strings_are_refused(isolated_cache):
    with pytest.raises(TypeError, match=r"probabilities\(\) takes a list of premises, not str"):
        nli.probabilities("Paris", "Paris")
    with pytest.raises(TypeError, match="premise 0 is NoneType"):
        nli.entailment([None], ["x"])
    assert nli.probabilities(("Paris is big.",), iter(["Paris is big."]), progress=False).shape == (1, 3)


def test_judge_specs_fail_at_once(tmp_path):
    start = time.perf_counter()
    for spec in ("foo", "", "   "):
        with pytest.raises(ValueError, match="choose 'minilm-fever-nli'"):
            nli.load_judge(spec)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        nli.load_judge(str(tmp_path / "no-such-judge"))
    assert time.perf_counter() - start < 5
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(RuntimeError, match="could not load NLI model.*holds no loadable model.*Offline choices"):
        nli.probabilities(["a"], ["b"], judge=nli.load_judge(str(empty)), progress=False)
