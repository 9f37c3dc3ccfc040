"""`make bench` (and `make bench DEVICE=cuda`): the in-process decoder on random-initialised models of real shapes.

No weights are downloaded: the model is built from the embedded model's config (`smollm2`: SmolLM2-135M's shape),
a LLaMA-2-7B shape with SmolLM2's vocabulary (`7b`: hidden 4096, 32 layers, 32 heads; GPU only, it needs 14 GB in
bf16), or a tiny 2-layer shape (`tiny`: what the tests run). Random weights never say EOS, so rows run to the end or
to a stop string. For each shape, in one run:

1. the CoT-SC workload of notebook 01 (6-shot CoT prompts of Adversarial HotpotQA questions, n=5, temperature 0.7,
   CoT stop strings) through covlib's decoder with the prompts' shared few-shot block prefilled once, and without;
   the two must give the same completions (checked, and printed);
2. transformers' own `generate` on the same prompts and sampling settings (its own random stream);
3. one prompt, greedy: decoding steps per second;
   on a GPU, 1 (shared prefix) and 3 both with the decoding step at fixed shapes, replayed as a CUDA graph (the
   default there: `covlib.generation.graphs`), and on the dynamic path (the step launched kernel by kernel), with the
   share of equal texts;
4. the prompts' prefill (prompt tokens per second) and decoding alone (new tokens per second, with and without the
   shared prefix: a call to a quarter of the new tokens less the same call to one token), the rates `make reproduce PLAN=1` uses;

each beside this machine's limit measured in the same run: on a CPU the fp32 GEMM peak (the share of it the decoder's
FLOPs reach), on a GPU the memory bandwidth (a step streams the weights once: steps/s <= bandwidth / weight bytes)
and the bf16 GEMM rate. These are figures to read, not tests: compare ratios from one run. With `--save-rates` (as
`make bench` runs it) each shape's decode and prefill rates and the default NLI judge's pairs per second go to the file
`make reproduce PLAN=1` reads (`covlib.runs.plan.rates_path()`, under this device's name).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench import decoder_flops, gemm_peak  # noqa: E402  (make bench's own GEMM peak and FLOP count)

SHAPES = ("tiny", "smollm2", "7b")


def sync(device: str) -> None:
    """Wait for the device's queued work (a GPU), so a clock reads finished work."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def limits(device: str) -> dict[str, float]:
    """This machine's limits: the fp32 GEMM peak on a CPU; copy bandwidth (read + write) and bf16 GEMM on a GPU."""
    import torch

    if not device.startswith("cuda"):
        return {"fp32_gemm_flops": gemm_peak("cpu") * 1e9}

    def best(fn, reps: int = 5) -> float:
        fn()
        sync(device)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            sync(device)
            times.append(time.perf_counter() - start)
        return min(times)

    x = torch.empty(1024**3 // 2, dtype=torch.bfloat16, device=device)
    y = torch.empty_like(x)
    copy = best(lambda: y.copy_(x))
    del x, y
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
    b = torch.randn_like(a)
    gemm = best(lambda: a @ b)
    return {"copy_bytes_per_s": 2 * 1024**3 / copy, "bf16_gemm_flops": 2 * 8192**3 / gemm}


def random_model(shape: str, device: str, dtype: str) -> Any:
    """A causal LM of `shape`, random-initialised (seed 0) from the embedded model's config, in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from covlib.generation import embedded_model_dir

    cfg = AutoConfig.from_pretrained(embedded_model_dir())
    if shape == "tiny":
        cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size = 2, 64, 128
        cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = 4, 2, 16
    elif shape == "7b":
        cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers = 4096, 11008, 32
        cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = 32, 32, 128
        cfg.max_position_embeddings = 4096
    elif shape != "smollm2":
        raise ValueError(f"unknown shape {shape!r}; choose one of {SHAPES}")
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype), attn_implementation="sdpa")
    return model.eval()


def decoder(model: Any, device: str, dtype: str, share: bool, batch_size: int, graphs: bool | None = None) -> Any:
    """covlib's in-process `LM` around `model` (the embedded tokenizer), with a call cache of its own; `graphs`: its
    `cuda_graphs` setting (None: the default, CUDA graphs on CUDA)."""
    from transformers import AutoTokenizer

    from covlib.core.cache import Cache
    from covlib.generation import LM, embedded_model_dir

    lm = LM(str(embedded_model_dir()), device=device, dtype=dtype, batch_size=batch_size,
            cache=Cache(Path(tempfile.mkdtemp(prefix="covlib-bench-decoder-")) / "calls.sqlite", table="lm"))
    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    tok.padding_side = "left"
    tok.pad_token = tok.pad_token or tok.eos_token
    lm._tok, lm._model, lm.share_prefix, lm.cuda_graphs = tok, model, share, graphs
    return lm


def cot_sc_prompts(n: int) -> list[str]:
    """Notebook 01's 6-shot CoT prompts for `n` Adversarial HotpotQA test questions (synthetic ones without the data)."""
    from covlib import data
    from covlib.papers.verify_edit.cot import cot_prompt, fewshot_examples

    try:
        examples = data.load_adv_hotpotqa(split="test")[:n]
        shots = fewshot_examples("hotpotqa")
    except (FileNotFoundError, OSError):
        shared = "".join(f"Q: question {i} about a film?\nA: First, a fact. The answer is x.\n\n" for i in range(6))
        return [f"{shared}Q: what is question {i}?\nA:" for i in range(n)]
    return [cot_prompt(ex.question, "hotpotqa", shots) for ex in examples]


def weight_bytes(model: Any) -> int:
    """Bytes a decoding step streams from memory: every weight once."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def cot_sc(lm: Any, prompts: list[str], n: int, tokens: int, device: str) -> tuple[list, float]:
    """The CoT-SC workload through covlib's decoder: (completions, seconds)."""
    from covlib.papers.verify_edit.cot import COT_STOP

    sync(device)
    start = time.perf_counter()
    out = lm.generate(prompts, n=n, temperature=0.7, max_new_tokens=tokens, stop=list(COT_STOP), seed=0, progress=False)
    sync(device)
    return out, time.perf_counter() - start


def hf_generate(model: Any, tok: Any, prompts: list[str], n: int, tokens: int, device: str, batch: int) -> tuple[int, float]:
    """transformers' `generate` on the same prompts (sampled at 0.7, `n` per prompt): (new tokens, seconds)."""
    import torch

    made, seconds = 0, 0.0
    per = max(1, batch // n)
    for i in range(0, len(prompts), per):
        enc = tok(prompts[i:i + per], return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        sync(device)
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**enc, do_sample=True, temperature=0.7, top_p=1.0, max_new_tokens=tokens,
                                 num_return_sequences=n, pad_token_id=tok.pad_token_id)
        sync(device)
        seconds += time.perf_counter() - start
        made += (out[:, enc.input_ids.shape[1]:] != tok.pad_token_id).sum().item()
    return made, seconds


def prefill_rate(model: Any, tok: Any, prompts: list[str], device: str, batch: int) -> float:
    """Prompt tokens per second of one forward over the prompts, `batch` at a time (what scoring and a prefill cost)."""
    import torch

    made, seconds = 0, 0.0
    for i in range(0, len(prompts), batch):
        enc = tok(prompts[i:i + batch], return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        sync(device)
        start = time.perf_counter()
        with torch.inference_mode():
            model(**enc, logits_to_keep=1)
        sync(device)
        seconds += time.perf_counter() - start
        made += int(enc.attention_mask.sum())
    return made / seconds


def decode_rate(lm: Any, prompts: list[str], n: int, tokens: int, device: str) -> float:
    """Generated tokens per second of decoding alone (what `make reproduce PLAN=1` prices new tokens at): the prompts'
    `n` samples to `tokens` new tokens without stop strings, less the same call to one token (its prefill), per token."""
    def timed(new: int) -> tuple[int, float]:
        sync(device)
        start = time.perf_counter()
        out = lm.generate(prompts, n=n, temperature=0.7, max_new_tokens=new, seed=new, progress=False)
        sync(device)
        return sum(len(c.tokens) for row in out for c in row), time.perf_counter() - start

    made, seconds = timed(tokens)
    one, prefill = timed(1)
    return (made - one) / max(seconds - prefill, 1e-9)


def judge_rate(device: str, pairs: int = 256) -> float | None:
    """Pairs per second of the default NLI judge (`make judge`'s) on FEVER-length pairs, or None where it is not built."""
    from covlib import nli

    if nli.offline_judge() != nli.DEFAULT_JUDGE:
        return None
    judge = nli.get_judge(None, device=device)
    judge.probabilities(["A warm-up premise."], ["A warm-up hypothesis."])  # loads the model: not part of the rate
    premise = "The film was directed by a French director and released in 1998 to mixed reviews from critics. " * 2
    tag = time.time_ns()  # pairs no cache has seen
    prem = [f"{premise} (pair {i} of {tag})" for i in range(pairs)]
    hyp = [f"The film in pair {i} was released in the 1990s." for i in range(pairs)]
    start = time.perf_counter()
    judge.probabilities(prem, hyp)
    return pairs / (time.perf_counter() - start)


def rates(results: list[dict[str, Any]], judge: float | None) -> dict[str, Any]:
    """What `make reproduce PLAN=1` reads (covlib.runs.plan): per shape its size and decode and prefill rates."""
    when = time.strftime("%Y-%m-%d", time.gmtime())
    return {"source": f"make bench on this machine, {when}", "device": results[0]["device"].split(":")[0],
            "shapes": {r["shape"]: {"parameters": r["parameters"], "decode_tok_s": r["decode_tok_s_unshared"],
                                    "decode_shared_tok_s": r["decode_tok_s_shared"], "prefill_tok_s": r["prefill_tok_s"]}
                       for r in results},
            "judge_pairs_s": judge}


def save_rates(entry: dict[str, Any], path: Path) -> None:
    """Add `entry` to the rates file under its device (other devices' entries kept), written whole."""
    try:
        kept = json.loads(path.read_text())
        kept = kept if isinstance(kept, dict) else {}
    except (OSError, ValueError):
        kept = {}
    kept[entry["device"]] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(kept, indent=1))
    tmp.replace(path)


def greedy_steps(lm: Any, prompt: str, tokens: int, device: str) -> float:
    """One prompt, greedy, `tokens` new tokens without stop strings: decoding steps per second."""
    sync(device)
    start = time.perf_counter()
    (comp,) = lm.generate([prompt], max_new_tokens=tokens, progress=False)
    sync(device)
    return len(comp[0].tokens) / (time.perf_counter() - start)


def run(shape: str = "smollm2", device: str = "cpu", prompts: int = 12, n: int = 5, tokens: int = 64,
        batch_size: int | None = None, with_hf: bool = True, compare_graphs: bool | None = None) -> dict[str, Any]:
    """Every figure of one shape on one device, as a dict (see the module's docstring)."""
    import torch

    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    batch_size = batch_size or (32 if device.startswith("cuda") else 16)
    texts = cot_sc_prompts(prompts)
    model = random_model(shape, device, dtype)
    cudnn = torch.backends.cuda.cudnn_sdp_enabled() if device.startswith("cuda") else None
    out: dict[str, Any] = {"shape": shape, "device": device, "dtype": dtype, "prompts": len(texts), "n": n,
                           "max_new_tokens": tokens, "parameters": sum(p.numel() for p in model.parameters()),
                           "torch": torch.__version__, "limits": limits(device), "cudnn_sdp_outside_decoding": cudnn}
    shared_lm, plain_lm = (decoder(model, device, dtype, share, batch_size) for share in (True, False))
    shared, t_shared = cot_sc(shared_lm, texts, n, tokens, device)
    plain, t_plain = cot_sc(plain_lm, texts, n, tokens, device)
    made = sum(len(c.tokens) for row in shared for c in row)
    out["identical_with_and_without_sharing"] = [[c.text for c in r] for r in shared] == [[c.text for c in r] for r in plain]
    out["cot_sc_tok_s_shared"], out["cot_sc_tok_s_unshared"] = made / t_shared, made / t_plain
    if with_hf:
        hf_made, t_hf = hf_generate(model, shared_lm.tokenizer, texts, n, tokens, device, batch_size)
        out["hf_generate_tok_s"] = hf_made / t_hf
    out["greedy_steps_s"] = greedy_steps(plain_lm, texts[0], tokens, device)
    if device.startswith("cuda") if compare_graphs is None else compare_graphs:
        out.update(fixed_and_dynamic(model, texts, n, tokens, device, dtype, batch_size))
    out["prefill_tok_s"] = prefill_rate(model, shared_lm.tokenizer, texts, device, batch_size)
    short = max(8, tokens // 4)  # decoding alone, on a quarter of the run's length: the rate, in less time
    out["decode_tok_s_shared"] = decode_rate(shared_lm, texts, n, short, device)
    out["decode_tok_s_unshared"] = decode_rate(plain_lm, texts, n, short, device)
    flops, weights = decoder_flops(model, context=0), weight_bytes(model)  # weights only, no attention
    if device.startswith("cuda"):
        out["step_limit_s"] = out["limits"]["copy_bytes_per_s"] / 2 / weights  # read once per step (copy counts 2x)
        out["greedy_share_of_limit"] = out["greedy_steps_s"] / out["step_limit_s"]
    else:
        peak = out["limits"]["fp32_gemm_flops"]
        out["cot_sc_share_of_gemm_peak"] = out["cot_sc_tok_s_shared"] * flops / peak
        out["greedy_share_of_gemm_peak"] = out["greedy_steps_s"] * flops / peak
    return out


def fixed_and_dynamic(model: Any, texts: list[str], n: int, tokens: int, device: str, dtype: str,
                      batch_size: int) -> dict[str, Any]:
    """CoT-SC (shared prefix) tok/s and one-prompt greedy steps/s at fixed shapes (CUDA graphs on CUDA, eager on a
    CPU) and on the dynamic path, and the share of their CoT-SC texts that are equal."""
    out, texts_of = {}, {}
    for name, graphs in (("fixed", True), ("dynamic", False)):
        comps, seconds = cot_sc(decoder(model, device, dtype, True, batch_size, graphs), texts, n, tokens, device)
        out[f"cot_sc_tok_s_shared_{name}"] = sum(len(c.tokens) for row in comps for c in row) / seconds
        out[f"greedy_steps_s_{name}"] = greedy_steps(decoder(model, device, dtype, False, batch_size, graphs),
                                                     texts[0], tokens, device)
        texts_of[name] = [c.text for row in comps for c in row]
    out["same_texts_fixed_and_dynamic"] = sum(a == b for a, b in zip(*texts_of.values())) / len(texts_of["fixed"])
    return out


def report(r: dict[str, Any]) -> str:
    """The figures of `run` as lines to read."""
    lines = [f"{r['shape']} shape ({r['parameters'] / 1e6:.0f}M parameters, {r['dtype']}) on {r['device']}: "
             f"{r['prompts']} CoT-SC prompts x n={r['n']}, {r['max_new_tokens']} new tokens",
             f"  covlib, shared prefix : {r['cot_sc_tok_s_shared']:9.1f} tok/s",
             f"  covlib, no sharing    : {r['cot_sc_tok_s_unshared']:9.1f} tok/s "
             f"(same completions: {r['identical_with_and_without_sharing']})"]
    if "hf_generate_tok_s" in r:
        lines.append(f"  transformers generate : {r['hf_generate_tok_s']:9.1f} tok/s (its own random stream)")
    lines.append(f"  one prompt, greedy    : {r['greedy_steps_s']:9.1f} steps/s")
    if "greedy_steps_s_fixed" in r:
        lines.append(f"  fixed shapes{' (CUDA graphs)' if r['device'].startswith('cuda') else ''} against the "
                     f"dynamic path: {r['cot_sc_tok_s_shared_fixed']:.1f} / {r['cot_sc_tok_s_shared_dynamic']:.1f} "
                     f"tok/s shared ({r['cot_sc_tok_s_shared_fixed'] / r['cot_sc_tok_s_shared_dynamic']:.2f}x), "
                     f"{r['greedy_steps_s_fixed']:.1f} / {r['greedy_steps_s_dynamic']:.1f} greedy steps/s "
                     f"({r['greedy_steps_s_fixed'] / r['greedy_steps_s_dynamic']:.2f}x); the same texts: "
                     f"{100 * r['same_texts_fixed_and_dynamic']:.0f} %")
    lines.append(f"  prefill               : {r['prefill_tok_s']:9.1f} prompt tok/s; decoding alone "
                 f"{r['decode_tok_s_shared']:.1f} tok/s shared, {r['decode_tok_s_unshared']:.1f} unshared")
    lim = r["limits"]
    if "fp32_gemm_flops" in lim:
        lines.append(f"  limit: fp32 GEMM peak {lim['fp32_gemm_flops'] / 1e9:.0f} GFLOP/s; the decoder reaches "
                     f"{100 * r['cot_sc_share_of_gemm_peak']:.0f} % of it on CoT-SC, "
                     f"{100 * r['greedy_share_of_gemm_peak']:.0f} % on one greedy prompt")
    else:
        lines.append(f"  limits: copy {lim['copy_bytes_per_s'] / 1e12:.2f} TB/s, bf16 GEMM "
                     f"{lim['bf16_gemm_flops'] / 1e12:.0f} TFLOP/s; a step streams the weights once: at most "
                     f"{r['step_limit_s']:.0f} steps/s, greedy reaches {100 * r['greedy_share_of_limit']:.1f} %")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="", help="cpu or cuda (default: cuda when visible)")
    ap.add_argument("--shapes", default="", help=f"comma-separated, of {SHAPES} (default: smollm2 on a CPU, "
                                                 "smollm2,7b on a GPU)")
    ap.add_argument("--prompts", type=int, default=0, help="CoT-SC prompts (default: 12 on a CPU, 60 on a GPU)")
    ap.add_argument("--tokens", type=int, default=0, help="new tokens per row (default: 64 on a CPU, 128 on a GPU)")
    ap.add_argument("--json", default="", help="also write the figures to this file")
    ap.add_argument("--save-rates", action="store_true", help="write the rates make reproduce PLAN=1 reads "
                                                                "(results/bench_rates.json)")
    args = ap.parse_args(argv)
    from covlib.core.devices import default_device

    device = args.device or default_device()
    gpu = device.startswith("cuda")
    shapes = [s for s in (args.shapes or ("smollm2,7b" if gpu else "smollm2")).split(",") if s]
    results = []
    for shape in shapes:
        r = run(shape, device, prompts=args.prompts or (60 if gpu else 12), tokens=args.tokens or (128 if gpu else 64))
        print(report(r), flush=True)
        results.append(r)
    judge = judge_rate(device)
    if judge:
        print(f"NLI judge ({device}): {judge:.0f} pairs/s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.save_rates:
        from covlib.runs import plan

        save_rates(rates(results, judge), plan.rates_path())
        print(f"rates for make reproduce PLAN=1: {plan.rates_path()}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("COVLIB_CACHE", tempfile.mkdtemp(prefix="covlib-bench-"))
    raise SystemExit(main())
