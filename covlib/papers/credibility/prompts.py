"""The paper's prompts (§3, §5), verbatim where it gives them; the parts it elides are ours and say so."""

from __future__ import annotations

from typing import Sequence


from covlib.core.metrics import normalize_answer
from covlib.core.records import Paragraph, Passage
from covlib.core.references import format_references


# --------------------------------------------------------------------------- prompts (§3, §5)

# §3, verbatim; the paper also gives the model demonstrations, which it does not print: ours are zero-shot.
REASONING_INSTRUCTION = "Please figure out the reasoning process towards the answer step-by-step without other content."
KEY_FACTS_INSTRUCTION = (
    "Please identify 2 to 4 non-redundant key-facts within the reasoning steps which are necessary to derive the "
    "final answer."
)
# §5.1 prints "Please write a high-quality answer ..." and elides the rest; the words after "answer" are ours.
ANSWER_INSTRUCTION = (
    "Please write a high-quality answer for the given question using only the provided references, and cite "
    "them properly using [1][2][3]."
)
CLOSED_BOOK_INSTRUCTION = "Please write a high-quality answer for the given question."  # ours: no references to cite
REFUSAL = "I'm sorry, I cannot answer the question based on the provided references"  # §5.1, verbatim
REFLECTION_INSTRUCTION = (  # §5.1: the answer instruction, then the refusal clause verbatim
    ANSWER_INSTRUCTION + f' If the references are insufficient to answer the question, respond with "{REFUSAL}".'
)
QUERY_MARKER = "I further need to ask the search engine:"  # §5.2, verbatim
COMPLETION_INSTRUCTION = (  # §5.2, verbatim
    f'Given the insufficiency of the current references, please start your query with "{QUERY_MARKER}" '
    "to gather more information."
)


def _prompt(question: str, refs: Sequence[Paragraph | Passage] | None, instruction: str, extra: str = "") -> str:
    """The paper's '[Question], [References]. <instruction>' layout; `extra` goes before the instruction."""
    parts = [f"Question: {question}"]
    if refs:
        parts.append("References:\n" + format_references(refs))
    if extra:
        parts.append(extra)
    parts.append(instruction)
    return "\n\n".join(parts)


def answer_prompt(question: str, refs: Sequence[Paragraph | Passage], reflection: bool = False) -> str:
    """The cited-answer prompt over numbered references (closed-book wording when there are none)."""
    if not refs:
        return _prompt(question, None, CLOSED_BOOK_INSTRUCTION)
    return _prompt(question, refs, REFLECTION_INSTRUCTION if reflection else ANSWER_INSTRUCTION)


def reasoning_prompt(question: str, refs: Sequence[Paragraph | Passage], answer: str) -> str:
    """Step reasoning (§3): question, references and validated answer, then the paper's instruction."""
    return _prompt(question, refs, REASONING_INSTRUCTION, extra=f"Answer: {answer}")


def key_facts_prompt(question: str, reasoning: str, answer: str) -> str:
    """Key-fact extraction (§3): question, reasoning steps and answer, then the paper's instruction."""
    return "\n\n".join([f"Question: {question}", f"Reasoning steps:\n{reasoning.strip()}", f"Answer: {answer}",
                        KEY_FACTS_INSTRUCTION])


def completion_prompt(question: str, refs: Sequence[Paragraph | Passage]) -> str:
    """Self-completion (§5.2): question and references, then the paper's request for a search query."""
    return _prompt(question, refs, COMPLETION_INSTRUCTION)


_REFUSAL_MARKERS = (normalize_answer("cannot answer the question"), normalize_answer("can't answer the question"),
                    normalize_answer("unable to answer the question"), normalize_answer("references are insufficient"))


def is_refusal(answer: str) -> bool:
    """Whether the answer declines as the reflection prompt asks ("I'm sorry, I cannot answer the question ...")."""
    text = normalize_answer(answer or "")
    return any(m in text for m in _REFUSAL_MARKERS)
