"""The decoder's identity checks on any device (a GPU's included), on a random-initialised model of a real shape.

The tests check these on the CPU with the embedded model's weights; where no weights can be downloaded (a GPU machine
without network), this script checks the same properties on the shapes `bench_decoder.py` builds:

1. greedy completions with the key/value cache written in place (`covlib.generation.kvcache`) and with transformers'
   own `DynamicCache` (tokens and log-probabilities);
2. sampled completions per seed: a prompt's samples alone and inside a batch of other prompts;
3. with and without the shared prefix (cascade attention): sampled completions and scores;
4. decoding at fixed shapes (`covlib.generation.graphs`: CUDA graphs on a GPU, eager elsewhere) and the dynamic path:
   greedy and sampled (with the shared prefix) texts and tokens.

In fp32 each must be equal (scores, summed in another order, within `SCORE_TOLERANCE`); in bf16 the figures are printed
(batched bf16 arithmetic may differ in the last bits).
Prints one line per check and exits 1 when an fp32 check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_decoder as bd  # noqa: E402  (the shapes, prompts and decoder the benchmark uses)

SCORE_TOLERANCE = 1e-4  # nats: fp32 log-probabilities of the same tokens summed with and without the shared prefix,
# or computed at fixed shapes (attention over the whole cache buffer) and on the dynamic path


def same(a: list, b: list, logprobs: bool = True) -> float:
    """The share of completions equal in text and tokens (and log-probabilities when `logprobs`)."""
    pairs = [(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    ok = [x.text == y.text and x.tokens == y.tokens and (not logprobs or x.token_logprobs == y.token_logprobs)
          for x, y in pairs]
    return sum(ok) / len(ok)


def gap(a: list, b: list) -> float:
    """The largest difference between the log-probabilities of the same tokens (completions with equal tokens)."""
    return max((abs(p - q) for ra, rb in zip(a, b) for x, y in zip(ra, rb) if x.tokens == y.tokens
                for p, q in zip(x.token_logprobs, y.token_logprobs)), default=0.0)


def checks(shape: str, device: str, dtype: str, prompts: int, tokens: int) -> dict[str, float]:
    """The share of equal completions (or scores) for each check of the module's docstring."""
    from unittest import mock

    from covlib.generation import decoding
    from covlib.papers.verify_edit.cot import COT_STOP

    texts = bd.cot_sc_prompts(prompts)
    model = bd.random_model(shape, device, dtype)
    def lm(share: bool = False, graphs: bool = False):
        """A decoder with a fresh call cache, on the dynamic path or at fixed shapes (CUDA graphs on CUDA)."""
        new = bd.decoder(model, device, dtype, share, 16)
        new.cuda_graphs = graphs
        return new

    out: dict[str, float] = {}
    greedy = dict(max_new_tokens=tokens, progress=False)
    in_place = lm().generate(texts, **greedy)
    with mock.patch.object(decoding, "reserve", lambda kv, extra: kv):
        out["greedy: in-place cache = DynamicCache"] = same(in_place, lm().generate(texts, **greedy))
    sampled = dict(n=5, temperature=0.7, max_new_tokens=tokens, stop=list(COT_STOP), seed=0, progress=False)
    alone = lm().generate(texts[:1], **sampled)
    batched = lm().generate(texts[::-1], **sampled)[-1:]
    out["sampled: alone = in a batch"] = same(alone, batched, logprobs=False)
    out["sampled: shared prefix = none"] = same(lm(True).generate(texts, **sampled), lm().generate(texts, **sampled),
                                                logprobs=False)
    fixed = lm(graphs=True).generate(texts, **greedy)
    out["greedy: fixed shapes = dynamic"] = same(fixed, in_place, logprobs=False)
    out["greedy: largest log-probability difference, fixed shapes - dynamic"] = gap(fixed, in_place)
    out["sampled, shared prefix: fixed shapes = dynamic"] = same(lm(True, graphs=True).generate(texts, **sampled),
                                                                 lm(True).generate(texts, **sampled), logprobs=False)
    answers = [" the answer is yes.", " no."] * (len(texts) // 2) + [" maybe."] * (len(texts) % 2)
    a, b = lm(True).score(texts, answers, progress=False), lm().score(texts, answers, progress=False)
    out["scores: largest difference, shared prefix - none"] = max(abs(x - y) for x, y in zip(a, b))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--shape", default="tiny", choices=bd.SHAPES)
    ap.add_argument("--dtypes", default="float32", help="comma-separated torch dtypes (float32 must match exactly)")
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    failed, results = False, {}
    for dtype in args.dtypes.split(","):
        results[dtype] = r = checks(args.shape, args.device, dtype, args.prompts, args.tokens)
        for name, value in r.items():
            exact = "difference" not in name
            bad = dtype == "float32" and (value != 1.0 if exact else value > SCORE_TOLERANCE)
            failed |= bad
            print(f"{args.shape} {dtype} on {args.device}: {name}: {value:.3g}{'  FAILED' if bad else ''}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
