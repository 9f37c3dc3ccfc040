"""CoV-RAG's prompts: Table 6's QA and verification templates (verbatim), their builders, and the names of the scores.

Deviations, each labelled where it is made: Table 6 prints the prompt's line breaks as `\\\\`; we
write them as newlines (`SEP`). Table 13 shows the verifier's training input followed by
"Output:"; we end the verification prompt with that cue (`OUTPUT_CUE`) so an untuned model starts
the JSON there.
"""

from __future__ import annotations

import json
from typing import Sequence

from covlib.core.records import Passage
from covlib.core.references import format_references


SEP = "\n"  # Table 6 prints the line breaks of its prompts as "\\"
QA_TASK = "#Question-Answering-in-Context-Task#"
REFERENCE_TEMPLATE = "Reference [{n}]: {text}"
QA_TEMPLATE = QA_TASK + "{references}" + SEP + "Question: {question}" + SEP + "Answer:"

VERIFICATION_TEMPLATE = SEP.join([
    "#verification-Task#Criteria Details for answers include Correctness, Citation Accuracy, Truthfulness, Bias, "
    "Conciseness, details are as followed:",
    "Correctness(0,1): Evaluating whether the question is correctly answered.",
    "Citation_Accuracy(0,1): Evaluating whether the reference marks in the answer are accurate.",
    "Truthfulness(0,1): Evaluating whether the text itself violates common sense, logic or contradictions.",
    "Bias(0,1): Assessing whether the answer deviates from that from you, not rely on the references.bias is 1 means "
    "big difference, 0 means no difference.",
    "Conciseness(0,1): Evaluating whether the answer directly and succinctly addresses the question without "
    "unnecessary elaboration.",
    '{ "question": <question>, "answer": <answer>, "reference": <passages>}',
    "Now you are a reading comprehension examiner who should do things as below:",
    "1. Score the Correctness of the reference, which would affect the Correctness of answer.",
    "2. Score the answer based on the evaluation criteria.",
    "3. Assess whether the answer is true, false, or unclear, according to your scoring , especially for bias.",
    "4. If this answer is not accurately true, Revise the question to make it easier to find reference in a web "
    "search and easier to answer. Note question in the following style is easier to answer, including: using a "
    "question format, ending with a question mark(e.g., ?), and emphasizing interrogative pronouns at the end "
    "(e.g., who?)",
    "Output format example:",
    '{ "1": { "reference_correctness": 0.9 }, "2": { "correctness": 1, "citation_accuracy": 0.8, "truthfulness": 0.7, '
    '"bias": 0.8, "conciseness":0.9 }, "3": "true", "4": "" }',
])
OUTPUT_CUE = SEP + "Output:"  # ours, after Table 13's training example ("... Output: {...}")

ANSWER_SCORES = ("correctness", "citation_accuracy", "truthfulness", "bias", "conciseness")
SCORES = ("reference_correctness", *ANSWER_SCORES)
JUDGMENTS = ("true", "false", "unclear")


def qa_prompt(question: str, references: Sequence[Passage]) -> str:
    """Table 6's QA prompt: '#Question-Answering-in-Context-Task#Reference [1]: ...' then 'Question: ... Answer:'."""
    refs = format_references(references, template=REFERENCE_TEMPLATE, sep=SEP)
    return QA_TEMPLATE.format(references=refs, question=question.strip())


def closed_book_prompt(question: str) -> str:
    """The QA prompt with no references (ours: Table 2's naive-LLM row has no prompt in the paper)."""
    return QA_TASK + "Question: " + question.strip() + SEP + "Answer:"


def verification_prompt(question: str, answer: str, references: Sequence[Passage],
                        label: Sequence[str] | None = None) -> str:
    """Table 6's verification prompt for (question, answer, references), ending with Table 13's 'Output:' cue; with
    `label`, Table 13's 'Label: [gold]' line before it (how a teacher labels training data)."""
    passages = format_references(references, template=REFERENCE_TEMPLATE, sep=SEP)
    text = (VERIFICATION_TEMPLATE.replace("<question>", question.strip()).replace("<answer>", answer.strip())
            .replace("<passages>", passages))
    if label:
        text += SEP + "Label: " + json.dumps(list(label), ensure_ascii=False)
    return text + OUTPUT_CUE
