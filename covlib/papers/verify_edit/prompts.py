"""Verify-and-Edit's verifying-question and verifying-answer prompts (verbatim from the paper's code) and rationale splitting."""

from __future__ import annotations

import re
from typing import Sequence

from covlib.core.text import split_sentences
from covlib.data import load_fewshot_answers
from covlib.papers.verify_edit.cot import Shot, check_dataset, fewshot_examples


VQ_PROMPTS = {
    "hotpotqa": (
        "Write a question that asks about the answer to the overall question.\n\n"
        "Overall Question:  The Sentinelese language is the language of people of one of which Islands in the Bay of Bengal?\n"
        "Answer: The language of the people of North Sentinel Island is Sentinelese.\n"
        "Question: What people's language is Sentinelese?\n\n"
        "Overall Question: Two positions were filled in The Voice of Ireland b which British-Irish girl group based in London, England?\n"
        "Answer: Little Mix is based in London, England.\n"
        "Question: What girl group is based in London, England?\n\n"
        "Overall Question: {question}\nAnswer: {sentence}\nQuestion:"
    ),
    "2wikimultihop": (
        "Write a question that validates the reason for an overall question.\n\n"
        "Overall Question: What is the date of death of the composer of film Baalaraajana Kathe?\n"
        "Reason: First, the composer of film Baalaraajana Kathe is S. Hanumantha Rao.\n"
        "Question: Who is the composer of film Baalaraajana Kathe?\n\n"
        "Overall Question: Who lived longer, Edward Frederick Sanderson or Forrest Towns?\n"
        "Reason: First, Edward Frederick Sanderson died at age 81.\n"
        "Question: How long did Edward Frederick Sanderson live for?\n\n"
        "Overall Question: {question}\nReason: {sentence}\nQuestion:"
    ),
    "fever": (
        "Write a question that validates the reason for a claim.\n\n"
        "Claim:  Reg Watson is a current television producer.\n"
        "Reason: Reginald James Watson AM was an Australian television producer and screenwriter.\n"
        "Question: What is Reg Watson's occupation?\n\n"
        "Claim: The Gadsden flag was named by Christopher Gadsden.\n"
        "Reason: there is no information on who named the Gadsden flag.\n"
        "Question: Who named the Gadsden flag?\n\n"
        "Claim: {question}\nReason: {sentence}\nQuestion:"
    ),
}


_VA_FIXED = {
    "2wikimultihop": (
        "The film was released in 1984 by Essex Films. Kistimaat is a 2014 Bangladeshi action film directed by "
        "Ashiqur Rahman and produced by Tiger Media Limited and The Abhi Pictures. I'm Taraneh, 15 is a 2002 "
        "Iranian film directed by Rasul Sadrameli. The film was released on May 4, 2001.\n"
        "Question: When was the film Kistimaat released?\n"
        "Answer: The film Kistimaat was released in 2014.\n\n"
        "Dwaram Venkataswami Naidu and also a lyricist. The film has musical score by S. Hanumantha Rao. "
        "Rao died 27 May 1980. Rao married Raja Mani with whom he had three daughters and one son.\n"
        "Question: Who is the composer of film Baalaraajana Kathe?\n"
        "Answer: The composer of film Baalaraajana Kathe is S. Hanumantha Rao.\n\n"
        "Adib Kheir was a leading Syrian nationalist of the 1920s. Filmed on location in the Purcell Mountains "
        "in British Columbia, the film was directed by Frank Marshall, written by John Patrick Shanley, and "
        "narrated by John Malkovich. Frank Wilton Marshall( born September 13, 1946) is an American film "
        "producer and director, often working in collaboration with his wife, Kathleen Kennedy. He received "
        "the Irving G. Thalberg award from the Academy of Motion Picture Arts and Sciences in 2018.\n"
        "Question: Who is the director of film Alive (1993 Film)?\n"
        "Answer: The director of film Alive is Frank Marshall.\n\n"
    ),
    "fever": (
        "Reginald James Watson AM (27 August 1926 – 8 October 2019) was an Australian television producer and "
        "screenwriter. He was executive producer on Crossroads and created Australian media exports serials "
        "such as Prisoner, Neighbours, The Young Doctors and Sons and Daughters.\n"
        "Question: What is Reg Watson's occupation?\n"
        "Answer: Reg Watson was an Australian television producer and screenwriter\n\n"
        "The flag is named after politician Christopher Gadsden (1724–1805), who designed it in 1775 during "
        "the American Revolution.\n"
        "Question: Who named the Gadsden flag?\n"
        "Answer: The Gadsden flag is named after Christopher Gadsden, but there is no information on who named it.\n\n"
    ),
}


VA_SHOTS_HOTPOTQA = 3


RATIONALE_MARKERS = ("First,", "Second,", "Third,", "Fourth,", "Moreover,")


_SPLIT_MARKERS = re.compile(r"(?:^|\s)(?:First|Second|Third|Fourth), ")


VQ_STOP = ("\n",)


VA_STOP = ("\n",)


REANSWER_STOP = ("\n",)


def split_rationale(rationale: str) -> list[str]:
    """Rationale sentences: split at "First, / Second, / Third, / Fourth," (dropped), else by sentence."""
    rationale = rationale.strip()
    if not rationale:
        return []
    if _SPLIT_MARKERS.search(rationale):
        return [p.strip() for p in _SPLIT_MARKERS.split(rationale) if p.strip()]
    return split_sentences(rationale)


def join_rationale(sentences: Sequence[str]) -> str:
    """'First, {s1} Second, {s2} ...' with capitalised sentences ending in punctuation (official answer_again)."""
    out = []
    for i, s in enumerate(sentences):
        s = s.strip()
        if not s:
            continue
        if s[-1] not in ".!?":
            s += "."
        out.append(f"{RATIONALE_MARKERS[min(len(out), len(RATIONALE_MARKERS) - 1)]} {s[0].upper()}{s[1:]}")
    return " ".join(out)


def verifying_question_prompt(question: str, sentence: str, dataset: str) -> str:
    """Appendix C.x.3: 2-shot verifying-question prompt for one rationale sentence."""
    return VQ_PROMPTS[check_dataset(dataset)].format(question=question.strip(), sentence=sentence.strip())


def verifying_answer_header(dataset: str, shots: Sequence[Shot] | None = None) -> str:
    """The shots part of the verifying-answer prompt (HotpotQA: the first 3 CoT shots with paragraphs)."""
    dataset = check_dataset(dataset)
    if dataset != "hotpotqa":
        return _VA_FIXED[dataset]
    shots = list(shots) if shots is not None else fewshot_examples("hotpotqa", VA_SHOTS_HOTPOTQA)
    answers = load_fewshot_answers()
    parts = []
    for ex, _ in shots:
        context = "\n".join(p.text for p in ex.paragraphs)
        parts.append(f"{context}\nQ: {ex.question.strip()}\nA: {answers.get(ex.id, ex.answer)}.\n\n")
    return "".join(parts)


def verifying_answer_prompt(verifying_question: str, sentences: Sequence[str], dataset: str, header: str) -> str:
    """Appendix C.x.4: retrieved sentences + verifying question, after the shots in `header`."""
    dataset = check_dataset(dataset)
    if dataset == "hotpotqa":
        return f"{header}{chr(10).join(sentences)}\nQ: {verifying_question.strip()}\nA:"
    context = " ".join(sentences).replace("\n", "")
    return f"{header}{context}\nQuestion: {verifying_question.strip()}\nAnswer:"
