"""Fine-tuning a sentence-pair classifier (a cross-encoder) with the transformers Trainer.

Nothing here knows about papers or datasets: it takes (text_a, text_b, label) triples,
a base encoder (a model folder or hub id) and the label names, and writes a standard
Hugging Face sequence-classification folder that `AutoModelForSequenceClassification`
(and so `covlib.nli.HFNLIJudge`) loads, with a `card.json` beside the weights.

* Seeded (`seed`: head initialisation, shuffling, dropout), with the Trainer's
  progress bar; length-grouped batches with dynamic padding to spend less on pads.
* Nothing lost on a crash: checkpoints every `save_steps` go to `<out_dir>.work/`
  (kept only for the same settings and data); a rerun resumes from the last one.
  The finished model is written to a temporary folder and renamed into place, so
  `out_dir` is either the old model or the complete new one.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

Triple = tuple[str, str, str]
CARD = "card.json"


def _dataset(tokenizer: Any, triples: Sequence[Triple], label2id: dict[str, int], max_length: int) -> Any:
    from datasets import Dataset

    bad = sorted({t[2] for t in triples} - set(label2id))
    if bad:
        raise ValueError(f"labels {bad} are not among {list(label2id)}")
    enc = tokenizer([t[0] for t in triples], [t[1] for t in triples], truncation=True, max_length=max_length)
    enc["labels"] = [label2id[t[2]] for t in triples]
    return Dataset.from_dict(dict(enc))


HEAD_PARTS = ("classifier", "pooler", "score")  # parameters a sentence encoder never trained for classification


def _optimizer(model: Any, lr: float, head_lr: float | None, weight_decay: float) -> Any:
    """AdamW with the new classification head (and pooler) at `head_lr`: a sentence encoder's CLS head starts cold."""
    import torch

    groups: dict[tuple[bool, bool], list] = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            head = head_lr is not None and any(part in name for part in HEAD_PARTS)
            decay = param.ndim > 1 and "LayerNorm" not in name
            groups.setdefault((head, decay), []).append(param)
    return torch.optim.AdamW([
        {"params": params, "lr": head_lr if head else lr, "weight_decay": weight_decay if decay else 0.0}
        for (head, decay), params in groups.items()
    ], lr=lr)



def mean_loss(model: Any, tokenizer: Any, triples: Sequence[Triple], batch_size: int = 32, max_length: int = 256) -> float:
    """Mean cross-entropy of a sequence classifier on labelled triples (labels by the model's label2id)."""
    import torch

    label2id = {k.lower(): v for k, v in model.config.label2id.items()}
    model.eval()
    total, n = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(triples), batch_size):
            chunk = triples[start : start + batch_size]
            enc = tokenizer([t[0] for t in chunk], [t[1] for t in chunk], truncation=True,
                            max_length=max_length, padding=True, return_tensors="pt").to(model.device)
            labels = torch.tensor([label2id[t[2].lower()] for t in chunk], device=model.device)
            loss = torch.nn.functional.cross_entropy(model(**enc).logits.float(), labels, reduction="sum")
            total, n = total + float(loss), n + len(chunk)
    return total / max(n, 1)


def fine_tune_pair_classifier(
    train: Sequence[Triple],
    base_model: str | Path,
    out_dir: str | Path,
    labels: Sequence[str],
    epochs: float = 1.0,
    batch_size: int = 32,
    learning_rate: float = 5e-5,
    head_learning_rate: float | None = 1e-3,
    warmup_ratio: float = 0.1,
    weight_decay: float = 0.01,
    max_length: int = 256,
    seed: int = 0,
    max_steps: int = -1,
    save_steps: int = 100,
    progress: bool = True,
    card: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fine-tune `base_model` as a len(labels)-way pair classifier on `train`; write it to `out_dir`; return its card."""
    import torch
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments, set_seed)

    if not train:
        raise ValueError("no training pairs")
    out_dir = Path(out_dir)
    labels = list(labels)
    label2id = {label: i for i, label in enumerate(labels)}
    settings = {
        "base_model": str(base_model), "labels": labels, "epochs": epochs, "batch_size": batch_size,
        "learning_rate": learning_rate, "head_learning_rate": head_learning_rate, "warmup_ratio": warmup_ratio, "weight_decay": weight_decay,
        "max_length": max_length, "seed": seed, "max_steps": max_steps, "n_train": len(train),
        "data": hashlib.sha256(json.dumps(list(train), ensure_ascii=False).encode()).hexdigest(),
    }
    work = out_dir.with_name(out_dir.name + ".work")
    stamp = work / "settings.json"
    if work.exists() and (not stamp.exists() or json.loads(stamp.read_text()) != settings):
        shutil.rmtree(work)  # checkpoints of other settings or data: never resume from them
    work.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(settings, indent=2))

    set_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base_model))
    model = AutoModelForSequenceClassification.from_pretrained(
        str(base_model), num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label2id
    )
    dataset = _dataset(tokenizer, train, label2id, max_length)
    steps_per_epoch = math.ceil(len(train) / batch_size)
    total_steps = max_steps if max_steps > 0 else math.ceil(epochs * steps_per_epoch)
    args = TrainingArguments(
        output_dir=str(work),
        num_train_epochs=epochs,
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        warmup_steps=int(warmup_ratio * total_steps),
        weight_decay=weight_decay,
        lr_scheduler_type="linear",
        train_sampling_strategy="group_by_length",
        logging_steps=max(1, min(50, total_steps // 20)),
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=1,
        seed=seed,
        data_seed=seed,
        report_to=[],
        disable_tqdm=not progress,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=DataCollatorWithPadding(tokenizer),
                      optimizers=(_optimizer(model, learning_rate, head_learning_rate, weight_decay), None))
    resume = any(work.glob("checkpoint-*"))
    start = time.time()
    trainer.train(resume_from_checkpoint=True if resume else None)
    seconds = time.time() - start

    losses = [(h["step"], h["loss"]) for h in trainer.state.log_history if "loss" in h]
    info = dict(card or {})
    info.update({
        "settings": settings,
        "train_seconds": round(seconds, 1),
        "resumed_from_checkpoint": resume,
        "steps": trainer.state.global_step,
        "loss_curve": losses,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    })
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / CARD).write_text(json.dumps(info, indent=2, ensure_ascii=False))
    old = out_dir.with_name(out_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if out_dir.exists():
        out_dir.rename(old)
    tmp.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return info


def read_card(model_dir: str | Path) -> dict[str, Any]:
    """The card.json written beside a fine-tuned model ({} when there is none)."""
    path = Path(model_dir) / CARD
    return json.loads(path.read_text()) if path.is_file() else {}


def update_card(model_dir: str | Path, **fields: Any) -> dict[str, Any]:
    """Add fields (e.g. evaluation metrics) to a model's card.json, atomically."""
    card = read_card(model_dir)
    card.update(fields)
    path = Path(model_dir) / CARD
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(card, indent=2, ensure_ascii=False))
    tmp.replace(path)
    return card
