"""The paper's models and numbers (Tables 1-4, Table 2's Pearson) and its questions."""

from __future__ import annotations

import random


from covlib.core.records import Example
from covlib.data import load_hotpotqa


# --------------------------------------------------------------------------- questions, models, the paper's numbers

# Hub ids of the paper's open models (§6; the paper names no checkpoints: these are our picks). ChatGPT has none.
PAPER_MODELS = {
    "LLaMA-7B": "huggyllama/llama-7b",
    "LLaMA-13B": "huggyllama/llama-13b",
    "Llama2-13B": "meta-llama/Llama-2-13b-hf",
    "ChatGLM2-6B": "THUDM/chatglm2-6b",
    "Vicuna-7B": "lmsys/vicuna-7b-v1.3",
    "Vicuna-13B": "lmsys/vicuna-13b-v1.3",
    "Llama2-chat-13B": "meta-llama/Llama-2-13b-chat-hf",
}
# The paper's tables in % (typed from ../shared/papers/headline-numbers.md, checked against the paper's text).
PAPER_TABLE1 = {  # model: (P, R, F1, SC, CitP, CitR); 5 references incl. both gold, TRUE as f
    "LLaMA-7B": (6.12, 22.96, 9.54, 36.42, 1.94, 3.0), "LLaMA-13B": (5.45, 16.33, 8.17, 51.98, 3.63, 6.2),
    "Llama2-13B": (5.70, 10.12, 7.60, 62.74, 6.17, 7.6), "ChatGLM2-6B": (66.85, 48.06, 55.45, 48.99, 3.36, 2.4),
    "Vicuna-7B": (47.04, 45.96, 46.48, 61.45, 11.99, 11.4), "Vicuna-13B": (53.00, 48.69, 50.78, 68.66, 21.77, 25.7),
    "Llama2-chat-13B": (57.13, 47.97, 52.23, 62.61, 19.79, 15.3), "ChatGPT": (85.40, 56.55, 68.22, 68.68, 90.99, 64.6),
}
PAPER_TABLE2 = {  # model: (P, R, EM-recall, human precision, human recall) on 50 questions
    "ChatGLM2-6B": (66.8, 48.0, 62.2, 60.8, 57.0), "Vicuna-7B": (47.0, 45.9, 67.6, 55.0, 43.5),
    "Vicuna-13B": (53.0, 48.6, 68.4, 64.0, 50.5), "Llama2-chat-13B": (57.1, 47.9, 69.8, 65.1, 41.5),
    "ChatGPT": (85.4, 56.5, 79.4, 78.4, 70.0),
}
PAPER_PEARSON = {"P": 0.87, "R": 0.88, "EM_recall": 0.54}
# §6.3's drops in recall from 5 to 10 references, in % as its text states them ("a minor decrease in recall rates
# (4.3% and 14.3% respectively)", "a significant 30% plunge"): relative or absolute, the paper does not say, so
# notebook 05 (`recall_drop`) gives ours both ways
PAPER_RECALL_DROP_5_TO_10 = {"ChatGPT": 4.3, "ChatGLM2-6B": 14.3, "LLaMA": 30.0, "Vicuna": 30.0}
PAPER_TABLE3 = {  # model: {setting: (P, R)}
    "ChatGLM2-6B": {"closed-book": (17.59, 13.72), "partial": (39.98, 25.87), "complete": (66.85, 48.06)},
    "Vicuna-7B": {"closed-book": (12.20, 15.51), "partial": (31.57, 34.95), "complete": (47.04, 45.96)},
    "Vicuna-13B": {"closed-book": (19.48, 21.58), "partial": (51.96, 44.80), "complete": (53.00, 48.69)},
    "Llama2-chat-13B": {"closed-book": (18.23, 26.83), "partial": (44.39, 34.37), "complete": (57.13, 47.97)},
    "ChatGPT": {"closed-book": (21.44, 39.17), "partial": (61.37, 35.34), "complete": (85.40, 56.55)},
}
PAPER_TABLE4 = {  # model: (BM25 P, R, F1, self-completion P, R, F1, reflection Acc, reflection F1)
    "LLaMA-7B": (3.81, 10.83, 5.85, 3.51, 10.53, 5.36, 51.2, 11.3),
    "LLaMA-13B": (4.63, 15.00, 7.11, 4.42, 15.73, 6.81, 51.8, 20.7),
    "Llama2-13B": (7.17, 13.83, 9.53, 5.54, 12.17, 7.68, 50.0, 8.9),
    "ChatGLM2-6B": (29.33, 22.93, 25.84, 34.47, 27.07, 30.41, 57.6, 61.2),
    "Vicuna-7B": (10.73, 13.33, 11.92, 13.66, 13.37, 13.51, 51.4, 44.5),
    "Vicuna-13B": (27.89, 19.33, 23.08, 22.52, 20.03, 21.19, 55.2, 61.0),
    "Llama2-chat-13B": (33.86, 24.33, 28.45, 32.67, 21.21, 25.76, 60.2, 67.1),
    "ChatGPT": (50.9, 36.65, 42.66, 57.65, 41.27, 48.18, 70.2, 77.2),
}


def load_questions(source: str = "", n: int = 500, seed: int = 0) -> list[Example]:
    """HotpotQA distractor questions: the shared 100-question sample (source ''), a file, or a hub id
    (then a seeded sample of `n` validation questions, as the paper's 500)."""
    examples = load_hotpotqa(source or None)
    if len(examples) > n:
        examples = random.Random(seed).sample(examples, n)
    return examples
