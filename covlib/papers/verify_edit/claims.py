"""Verify-and-Edit's directional claims, each with the paper's sentence, its numbers, and its headline setting.

Read by the claims ledger (`covlib.report.claims`); notebooks 01-03 record the estimates.
Quotes are verbatim from the paper's extracted text (`../shared/papers/003_*.txt`).

Beside the claims, the comparisons that test them across runs: `auc_difference` (two runs' AUC on the
same questions, paired) and `cross_table_comparisons` (notebook 03: dataset knowledge against an
open-domain source, FEVER's gain against HotpotQA's). Each comparison is {"claim", "scope", "est",
"unit"} (`est` a `covlib.core.stats` test result) or {"claim", "scope", "untestable"}, as this
module's `record` takes it.
"""

from __future__ import annotations

from typing import Sequence

from covlib.core.claim import Claim, ClaimSet
from covlib.core.metrics import accuracy_coverage_auc
from covlib.core.stats import independent_difference, paired_difference, paired_statistic_difference
from covlib.papers.verify_edit.knowledge import NEAR_ORACLE, RETRIEVER_KINDS
from covlib.papers.verify_edit.parameters import PARAMETERS

PAPER = "Verify-and-Edit"
# `planted=`: what the simulated model `sim:paper` plants, per claim, in its unit: the numbers planted.effects() works
# out from the planted rates (tests/papers/verify_edit/test_simulation.py checks that they agree)

CLAIMS: tuple[Claim, ...] = (
    Claim("ve-consistency-separates", PAPER,
          "CoT-SC consistency is higher for correct than for incorrect predictions",
          "As shown in Fig. 2, the incorrect samples show a left-skewed consistency distribution, where most incorrect "
          "predictions have low consistencies. On the other hand, the distribution of correct predictions shows a "
          "right-skewed tendency, where there are very few incorrect samples with higher consistencies.",
          "Fig. 2 (text-davinci-003, 250 Adversarial HotpotQA questions): a density plot, no means given",
          "01_consistency_kde", "mean consistency (correct) − mean consistency (incorrect), on [0, n]",
          primary="hotpotqa", full_n=PARAMETERS["01"]["n_questions"].default, planted=1.199,
          planted_source="Fig. 2's shapes (no means printed): the planted question types of planted.SHARES"),
    Claim("ve-edit-below-half-helps", PAPER,
          "Editing the predictions below ⌈n/2⌉ raises EM over not editing",
          "As the threshold increases, accuracy first increases, reaching a peak close to $\\lceil n/2 \\rceil$, "
          "which is 3, before decreasing.",
          "Fig. 3 (Adversarial HotpotQA): EM rises from threshold 0 to a peak near 3 of 5",
          "02_threshold_ablation", "EM at threshold ⌈n/2⌉ − EM at threshold 0 (no edit), paired",
          primary="hotpotqa", paper_effect=4.5, effect_source="Table 1: the smallest open-domain gain (Wikipedia, +4.5)",
          full_n=PARAMETERS["02"]["n_questions"].default, planted=25.6,
          planted_source="Table 1, Dataset knowledge (notebook 02's): 56.8 − 31.2"),
    Claim("ve-half-beats-edit-all", PAPER,
          "Editing only below ⌈n/2⌉ gives higher EM than editing every prediction (threshold n)",
          "As we go beyond the ideal threshold $\\lceil n/2 \\rceil$, we are mostly re-editing correct samples, and "
          "the introduced noise may disrupt the original reasoning chains.",
          "Fig. 3: EM at threshold 5 of 5 is below the peak near 3 (values not printed)",
          "02_threshold_ablation", "EM at threshold ⌈n/2⌉ − EM at threshold n, paired",
          primary="hotpotqa", full_n=PARAMETERS["02"]["n_questions"].default, planted=5.943,
          planted_source="Fig. 3 prints no values: re-edited right answers break at planted.BREAK"),
    Claim("ve-auc-follows-em", PAPER,
          "AUC, like EM, is higher at threshold ⌈n/2⌉ than when every prediction is edited",
          "The AUC scores demonstrate a similar trend.",
          "Fig. 3: the AUC curve peaks with EM near threshold 3 (values not printed)",
          "02_threshold_ablation", "AUC (the area under the accuracy-coverage curve, answers ranked by confidence: "
          "it moves with accuracy and with the ranking) at threshold ⌈n/2⌉ − at threshold n, on the same questions; "
          "the 95% interval of a paired bootstrap decides (a test of equal AUC)",
          primary="hotpotqa", full_n=PARAMETERS["02"]["n_questions"].default, planted=7.007,
          planted_source="Fig. 3 prints no values: from planted.BREAK and the calibration planted after Table 1"),
    Claim("ve-beats-cot-sc", PAPER,
          "CoT-SC + Verify-and-Edit beats CoT-SC",
          "Then, when we use the adversarially augmented paragraphs provided in the dataset, the model is able to "
          "demonstrate very high EM (56.8%) and AUC (60.94) at the same time.",
          "Tables 1-3: +4.5 to +25.6 EM (HotpotQA; Dataset +25.6), +3.4 to +9.5 (2Wiki), +1.3 to +1.9 accuracy (FEVER)",
          "03_verify_and_edit_tables", "EM/accuracy of CoT-SC + VE − CoT-SC, paired over questions",
          primary="hotpotqa, dataset", paper_effect=25.6, effect_source="Table 1, Dataset knowledge: 56.8 − 31.2",
          full_n=PARAMETERS["03"]["n_hotpotqa"].default),
    Claim("ve-raises-auc", PAPER,
          "CoT-SC + Verify-and-Edit has a higher AUC than CoT-SC",
          "Then, when we use the adversarially augmented paragraphs provided in the dataset, the model is able to "
          "demonstrate very high EM (56.8%) and AUC (60.94) at the same time.",
          "Table 1: AUC 34.97 (CoT-SC) → 45.62 to 60.94 (+ VE); Table 2 likewise",
          "03_verify_and_edit_tables", "AUC (the area under the accuracy-coverage curve, answers ranked by "
          "confidence: it moves with accuracy and with the ranking) of CoT-SC + VE − of CoT-SC, on the same "
          "questions; the 95% interval of a paired bootstrap decides (a test of equal AUC)",
          primary="hotpotqa, dataset", full_n=PARAMETERS["03"]["n_hotpotqa"].default, planted=25.97,
          planted_source="Table 1, Dataset knowledge: AUC 60.94 − 34.97"),
    Claim("ve-cot-beats-standard", PAPER,
          "CoT prompting beats Standard few-shot prompting",
          "Reported in Table 1, we observe that CoT improves on top of the Standard few-shot setting.",
          "Tables 1-3: CoT − Standard = +8.7 (HotpotQA), +11.5 (2Wiki), +3.2 (FEVER)",
          "03_verify_and_edit_tables", "EM/accuracy of CoT − Standard, paired over questions",
          primary="hotpotqa", paper_effect=8.7, effect_source="Table 1: 31.8 − 23.1", full_n=PARAMETERS["03"]["n_hotpotqa"].default),
    Claim("ve-dataset-largest-gain", PAPER,
          "Dataset knowledge gives a larger gain than open-domain retrieval",
          "This is similar to an oracle setup, which provides an upper bound of the performance boost, assuming we "
          "have a good retrieval system.",
          "Table 1: +25.6 EM (Dataset) against +4.5 / +4.8 / +6.5 (Wikipedia / DrQA / Google)",
          "03_verify_and_edit_tables", "EM of VE with dataset knowledge − EM of VE with an open-domain source, paired",
          primary="hotpotqa", paper_effect=19.1, effect_source="Table 1: 56.8 − 37.7 (Google, the best open source)",
          full_n=PARAMETERS["03"]["n_hotpotqa"].default, planted=0.0,
          planted_source="none: the simulated verifying answer reads the retrieved sentences, not their source"),
    Claim("ve-fever-gains-less", PAPER,
          "Verify-and-Edit gains less on FEVER than on the multi-hop HotpotQA",
          "As the reasoning required by the Fever dataset is less multi-hop compared to HotpotQA and 2Wiki-MultiHop, "
          "we anticipate that it should demonstrate lower improvements compared to the other two.",
          "Tables 1 and 3, Wikipedia: +4.5 EM (HotpotQA) against +1.6 accuracy (FEVER)",
          "03_verify_and_edit_tables", "VE's gain on HotpotQA − its gain on FEVER (independent questions), same source",
          primary="bm25", paper_effect=2.9, effect_source="Tables 1 and 3, Wikipedia: 4.5 − 1.6",
          full_n=PARAMETERS["03"]["n_fever"].default, planted=24.15,
          planted_source="HotpotQA's planted gain (Table 1, Dataset: 25.6) − FEVER's (Table 3, mean of Wiki. and "
                         "DrQA: 1.45), whatever the source"),
    Claim("ve-2wiki-gains-more", PAPER,
          "Verify-and-Edit gains more on 2WikiMultiHop than on HotpotQA",
          "As shown in Table 2, our method demonstrates even stronger performances on 2WikiMultiHop compared to "
          "HotpotQA.",
          "Table 2 (2Wiki): +3.4 to +5.9 EM with open-domain retrieval, +9.5 with Dataset knowledge; Table 1 "
          "(HotpotQA): +4.5 to +6.5, +25.6",
          "", "EM gain over CoT-SC on 2WikiMultiHop − on HotpotQA, with the same knowledge source",
          untestable="the paper's gains are with Wikipedia, DrQA and Google (the network) or Dataset knowledge; our "
                     "2Wiki dev file has no paragraphs (no Dataset knowledge) and its questions are retrieved from the "
                     "HotpotQA paragraph corpus, which rarely holds their answers, while for HotpotQA that corpus is "
                     "near-oracle: no offline run compares the two under the same kind of knowledge"),
    Claim("ve-beats-calibrator-auc", PAPER,
          "With Dataset knowledge, Verify-and-Edit has a higher AUC than CoT-SC with Ye and Durrett's calibrator",
          "In comparison, the calibrator results in a lower AUC and cannot improve the accuracy as it does not "
          "generate alternative answers in open-domain settings.",
          "Table 1: AUC 49.00 (CoT-SC + Calib., Dataset) vs 60.94 (CoT-SC + VE, Dataset)",
          "", "AUC of CoT-SC + VE − AUC of CoT-SC + calibrator, Dataset knowledge",
          untestable="the calibrator (Ye and Durrett 2022: trained on GPT-3's explanations and their factuality "
                     "scores) is not implemented here"),
    Claim("ve-gains-more-than-react", PAPER,
          "Verify-and-Edit's EM gain over CoT-SC is larger than ReAct's",
          "When we combine the search engine results from Google into the framework, the EM is increased by 6.5%, "
          "which is 3.8x the ReAct result.",
          "Table 1: ReAct → CoT-SC +1.7 EM (Wikipedia, PaLM, reported by ReAct on the whole dataset); CoT-SC + VE "
          "+4.5 (Wikipedia) to +6.5 (Google)",
          "", "EM gain of VE over CoT-SC − EM gain of ReAct over CoT-SC",
          untestable="ReAct (a reason-and-act agent calling the Wikipedia API) is not implemented here, and the "
                     "paper's numbers for it are ReAct's own, with PaLM on the whole dataset"),
    Claim("ve-fever-wikipedia-beats-drqa", PAPER,
          "On FEVER, Verify-and-Edit gains more with Wikipedia search than with DrQA",
          "Similar to before, the Wikipedia retrieval is able to result in a larger improvement over DrQA, and "
          "Google search improves further at 1.9%.",
          "Table 3: accuracy 53.6 (Wikipedia, +1.6) vs 53.3 (DrQA, +1.3)",
          "", "FEVER accuracy of VE with Wikipedia search − with DrQA, paired",
          untestable="Wikipedia search needs the network, and our DrQA-style TF-IDF retriever searches a FEVER "
                     "corpus built from the claims' own evidence pages (near-oracle), not DrQA's Wikipedia"),
    Claim("ve-human-study", PAPER,
          "People judge Verify-and-Edit's reasoning chains more factually consistent than CoT-SC's",
          "Shown in Table 4, humans select the reasoning chains produced by Verify-and-Edit as more factually "
          "consistent 53% of the time, compared to 17% for the CoT-SC baseline.",
          "Table 4: 50 HotpotQA questions, two annotators, Cohen κ 0.25",
          "", "share of questions where people prefer VE's chain − share preferring CoT-SC's",
          untestable="needs two people to compare 50 pairs of reasoning chains; no rating was collected for this "
                     "project"),
)

_SET = ClaimSet(CLAIMS)  # the record builders notebooks use; an id of another paper is an error
claim, estimate, untestable, same_as, record = _SET.claim, _SET.estimate, _SET.untestable, _SET.same_as, _SET.record


def auc_difference(a: Sequence, b: Sequence, confidence: str = "confidence", seed: int = 0) -> dict:
    """AUC (x100) of records `a` minus that of `b`, the same questions in the same order: a paired bootstrap decides.

    Records are `VERecord`s or `cot.PromptResult`s: anything with `id`, `correct` and the `confidence` field."""
    if [r.id for r in a] != [r.id for r in b]:
        raise ValueError("auc_difference needs the same questions in the same order")
    cols = lambda rs: ([getattr(r, confidence) for r in rs], [r.correct for r in rs])  # noqa: E731
    return {**paired_statistic_difference(accuracy_coverage_auc, cols(a), cols(b), seed=seed), "scale": 1.0}


def cross_table_comparisons(details: dict, correctness: dict, seed: int = 0) -> list[dict]:
    """Notebook 03's comparisons across rows: dataset knowledge against an open-domain source, FEVER's gain against
    HotpotQA's; each {"claim", "scope", "unit", "est"} or {"claim", "scope", "untestable"}.

    `details` maps (dataset, knowledge kind) to VE records, `correctness` (dataset, method) to 0/1 lists.
    """
    out = []
    for name in sorted({n for n, _ in details} - {"fever"}):
        open_kinds = [k for n, k in details if n == name and k != "dataset"
                      and not (k in RETRIEVER_KINDS and name in NEAR_ORACLE)]
        if (name, "dataset") not in details or not open_kinds:
            why = ("no open-domain source ran: the paper's Wikipedia, DrQA and Google need the network, and our "
                   f"offline retrievers are near-oracle here ({NEAR_ORACLE.get(name, 'no dataset knowledge ran')})")
            out.append({"claim": "ve-dataset-largest-gain", "scope": name, "untestable": why})
            continue
        for kind in open_kinds:
            est = paired_difference([r.correct for r in details[(name, "dataset")]],
                                    [r.correct for r in details[(name, kind)]], scale=100, seed=seed)
            out.append({"claim": "ve-dataset-largest-gain", "scope": f"{name}, dataset − {kind}", "unit": "EM points",
                        "est": est})
    common = sorted(k for n, k in details if n == "hotpotqa" and ("fever", k) in details)
    for kind in common:
        gains = {n: [a.correct - b for a, b in zip(details[(n, kind)], correctness[(n, "CoT-SC")])]
                 for n in ("hotpotqa", "fever")}
        est = independent_difference(gains["hotpotqa"], gains["fever"], scale=100, seed=seed)
        oracle = ({"near_oracle": f"HotpotQA: {NEAR_ORACLE['hotpotqa']}; FEVER: {NEAR_ORACLE['fever']}"}
                  if kind in RETRIEVER_KINDS else {})
        out.append({"claim": "ve-fever-gains-less", "scope": f"{kind}, hotpotqa − fever", "est": est,
                    "unit": "points of gain (EM on HotpotQA, accuracy on FEVER)", **oracle})
    if not common:
        out.append({"claim": "ve-fever-gains-less", "scope": "", "untestable":
                    "HotpotQA and FEVER did not both run Verify-and-Edit with one knowledge source"})
    return out
