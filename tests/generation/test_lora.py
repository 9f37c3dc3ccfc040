"""LoRA fine-tuning of the embedded LM (covlib.generation.training) and adapters loaded through covlib.generation, keyed by content."""

from __future__ import annotations

import json
import shutil

import pytest

from covlib import generation as L
from covlib.generation import training

PAIRS = [
    ("#Question-Answering-in-Context-Task#Reference [1]: Beorn is a skin-changer who turns into a bear.\n"
     "Question: who turns into a bear in the hobbit\nAnswer:", " Beorn [1]."),
    ("#Question-Answering-in-Context-Task#Reference [1]: Smaug is a dragon of the Lonely Mountain.\n"
     "Question: which dragon guards the lonely mountain\nAnswer:", " Smaug [1]."),
    ("#verification-Task# question: who turns into a bear, answer: Bilbo [1].\nOutput:",
     ' {"3": "false", "4": "Who turns into a bear in The Hobbit?"}'),
    ("#verification-Task# question: which dragon, answer: Smaug [1].\nOutput:", ' {"3": "true", "4": ""}'),
]


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """A LoRA adapter trained for a few steps on the four pairs (module-scoped: trained once)."""
    out = tmp_path_factory.mktemp("adapters") / "cov-rag-tiny"
    info = training.fine_tune_lora(PAIRS, L.embedded_model_dir(), out, rank=8, alpha=16, max_steps=8, batch_size=4,
                                   learning_rate=2e-3, warmup_ratio=0.0, seed=0, progress=False,
                                   card={"name": "cov-rag-tiny"})
    return out, info


def test_target_tokens_only_carry_labels():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(L.embedded_model_dir()))
    (row,) = training.target_dataset(tok, PAIRS[:1], max_length=1024)
    n_target = len(tok(" Beorn [1].", add_special_tokens=False).input_ids) + 1  # + EOS
    assert len(row["input_ids"]) == len(row["labels"])
    assert row["labels"][-n_target:] == row["input_ids"][-n_target:]
    assert set(row["labels"][:-n_target]) == {-100}
    (short,) = training.target_dataset(tok, PAIRS[:1], max_length=12)  # the prompt loses its start, not the target
    assert len(short["input_ids"]) == 12 and short["labels"][-n_target:] == row["labels"][-n_target:]
    with pytest.raises(ValueError, match="empty target"):
        training.target_dataset(tok, [("prompt", "")], max_length=64)


def test_lora_steps_lower_the_target_loss(adapter):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, info = adapter
    tok = AutoTokenizer.from_pretrained(str(out))
    base = AutoModelForCausalLM.from_pretrained(str(L.embedded_model_dir()))
    before = training.target_loss(base, tok, PAIRS)
    tuned = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(L.embedded_model_dir())), str(out))
    after = training.target_loss(tuned, tok, PAIRS)
    assert after < 0.8 * before, (before, after)
    card = training.read_card(out)
    assert card["name"] == "cov-rag-tiny" and card["steps"] == 8 and card["settings"]["rank"] == 8
    assert 0 < card["trainable_parameters"] < 10_000_000  # a LoRA, not the whole 135M model
    assert (out / "adapter_config.json").is_file() and not out.with_name(out.name + ".work").exists()
    modules = json.loads((out / "adapter_config.json").read_text())["target_modules"]
    assert len(modules) > 1 and modules == sorted(modules), "saved in one order: the fingerprint must not follow the hash seed"


def test_a_retrained_adapter_never_returns_old_cached_completions(adapter, tmp_path, isolated_cache):
    out, _ = adapter
    folder = tmp_path / "adapter"
    shutil.copytree(out, folder)
    prompt = [PAIRS[0][0]]
    first = L.LM(adapter=folder)
    a = first.generate(prompt, max_new_tokens=6, progress=False)
    again = L.LM(adapter=folder)
    assert again.generate(prompt, max_new_tokens=6, progress=False)[0][0].text == a[0][0].text
    assert again.forward_calls == 0, "same adapter files: served from the cache"
    assert again.name.endswith("+adapter:adapter") and L.describe(again)["adapter_files"] == first.adapter_files

    training.fine_tune_lora(PAIRS[:2], L.embedded_model_dir(), folder, rank=8, alpha=16, max_steps=4, batch_size=2,
                            learning_rate=5e-3, warmup_ratio=0.0, seed=1, progress=False)
    retrained = L.LM(adapter=folder)
    assert retrained.adapter_files != first.adapter_files
    retrained.generate(prompt, max_new_tokens=6, progress=False)
    assert retrained.forward_calls > 0, "retrained adapter in the same folder was served the old cached completion"
    base = L.LM()
    base.generate(prompt, max_new_tokens=6, progress=False)
    assert base.forward_calls > 0, "the base model shares no cache entries with its adapters"
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        L.LM(adapter=tmp_path)


def test_the_lora_loss_is_the_token_mean_over_a_batch_not_a_sum_over_pairs(tmp_path):
    """What fine_tune_lora minimises (the Trainer's loss on a batch) is the mean over the batch's target tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    tok = AutoTokenizer.from_pretrained(str(L.embedded_model_dir()))
    model = AutoModelForCausalLM.from_pretrained(str(L.embedded_model_dir()))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    inputs = training._pad_collator(pad)(training.target_dataset(tok, PAIRS, 1024))
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[]))
    token_mean = training.target_loss(model, tok, PAIRS, batch_size=len(PAIRS))  # sets eval mode
    with torch.no_grad():
        loss = float(trainer.compute_loss(model, inputs))
    per_pair = [training.target_loss(model, tok, [p]) for p in PAIRS]
    assert loss == pytest.approx(token_mean, rel=1e-4)
    assert loss != pytest.approx(sum(per_pair), rel=1e-2) and loss != pytest.approx(sum(per_pair) / len(PAIRS), rel=1e-3)
    assert "sum of -log p(target | prompt) over the" not in training.__doc__  # the documentation says the same
    assert "token" in training.fine_tune_lora.__doc__
