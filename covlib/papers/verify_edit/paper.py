"""Verify-and-Edit's reported numbers (Tables 1-3, Fig. 3), and how its rows and knowledge sources map to ours.

What the paper printed for GPT-3 text-davinci-003 (§5.2-5.4), for the notebooks to set ours beside:
EM (accuracy for FEVER) in %, AUC x100 (None: not reported; Table 3 gives no AUC). Rows are
(method, the paper's knowledge source, "-" for the prompting baselines). The *CoT-SC → ReAct*,
*ReAct → CoT-SC* and *CoT-SC + Calib.* rows are other papers' methods and are left out.
"""

from __future__ import annotations

PAPER_MODEL = "text-davinci-003"  # GPT-3, every table
PAPER_TABLES = {  # dataset -> {(method, paper knowledge): (EM/acc %, AUC x100 or None)}
    "hotpotqa": {  # Table 1, Adversarial HotpotQA (250 questions)
        ("Standard", "-"): (23.1, 43.24), ("CoT", "-"): (31.8, 38.30), ("CoT-SC", "-"): (31.2, 34.97),
        ("CoT-SC + VE", "Wiki."): (35.7, 45.62), ("CoT-SC + VE", "DrQA"): (36.0, 46.06),
        ("CoT-SC + VE", "Google"): (37.7, 47.98), ("CoT-SC + VE", "Dataset"): (56.8, 60.94),
    },
    "2wikimultihop": {  # Table 2, 2WikiMultihop (1000 sampled dev questions)
        ("Standard", "-"): (16.9, 35.89), ("CoT", "-"): (28.4, 16.64), ("CoT-SC", "-"): (27.7, 17.16),
        ("CoT-SC + VE", "Wiki."): (33.1, 28.32), ("CoT-SC + VE", "DrQA"): (31.1, 27.75),
        ("CoT-SC + VE", "Google"): (33.6, 30.06), ("CoT-SC + VE", "Dataset"): (37.2, 32.28),
    },
    "fever": {  # Table 3, FEVER (1000 claims): accuracy, no AUC
        ("Standard", "-"): (46.8, None), ("CoT", "-"): (50.0, None), ("CoT-SC", "-"): (52.0, None),
        ("CoT-SC + VE", "Wiki."): (53.6, None), ("CoT-SC + VE", "DrQA"): (53.3, None),
        ("CoT-SC + VE", "Google"): (53.9, None),
    },
}
TABLE_OF = {"hotpotqa": "Table 1", "2wikimultihop": "Table 2", "fever": "Table 3"}
# Our knowledge kinds under the paper's names (None: no counterpart in the paper); see docs/deviations.md
PAPER_KNOWLEDGE = {"dataset": "Dataset", "bm25": "Wiki.", "tfidf": "DrQA", "web": "Google", "dense": None}
# Our knowledge kinds by a short name of what ran (a figure's bar)
OUR_KNOWLEDGE = {"dataset": "Dataset", "bm25": "BM25", "tfidf": "TF-IDF", "web": "web search", "dense": "dense"}
PAPER_FIG3_PEAK_THRESHOLD = 3  # Fig. 3 / §5.6: EM and AUC peak near ceil(n/2) = 3 of n = 5


def paper_rows() -> list[tuple[str, str, str, float, float | None]]:
    """Tables 1-3 as rows (dataset, method, paper knowledge, EM/acc %, AUC x100 or None), in the paper's order."""
    return [(name, method, kind, em, auc) for name, table in PAPER_TABLES.items()
            for (method, kind), (em, auc) in table.items()]


def row_label(method: str, kind: str | None = None) -> str:
    """A figure's name for one of our rows: the method; for Verify-and-Edit, the knowledge that ran and the paper's
    name of it in brackets on a second line ("VE: BM25\n(paper: Wiki.)")."""
    if method != "CoT-SC + VE":
        return method
    ours, paper = OUR_KNOWLEDGE.get(kind or "", kind or "?"), PAPER_KNOWLEDGE.get(kind or "")
    return f"VE: {ours}" + (f"\n(paper: {paper})" if paper and paper != ours else "")
