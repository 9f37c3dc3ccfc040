"""Copied source: an answer that holds the text of covlib's function for its step, flagged for the teacher.

With the graded functions absent from a submission's covlib (`teaching.stubs`), copying their source text into an
answer is the one way left to hand in covlib's work. It is found as course tools find plagiarism: both texts become
token streams with names, strings and numbers normalised (renaming a variable changes nothing), and the tokens they
share in runs of at least `MIN_BLOCK` are counted (a line added or dropped splits a run, it does not hide it). At least
`MIN_TOKENS` such tokens covering at least `MIN_SHARE` of the function are reported with the lines on both sides; it
costs no points: the teacher judges it.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import io
import keyword
import tokenize
from functools import lru_cache
from typing import Iterable

from covlib.core import paths

MIN_TOKENS = 80  # fewer shared tokens are idioms: a function this short, written right, reads like covlib's
MIN_SHARE = 0.6  # of the reference function's tokens (the shipped solutions share at most 52%)
MIN_BLOCK = 8  # a shared run shorter than this is chance, not copying
MAX_TOKENS = 20_000  # of an answer compared (about 30 KB of code): a longer one is compared by its start
BUILTINS = frozenset(dir(builtins))
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
        tokenize.ENDMARKER}


def tokens(source: str) -> list[tuple[str, int]]:
    """(normalised token, line) of `source`: identifiers become `N`, strings `S`, numbers `0`; keywords, operators
    and the names of builtins stay; a docstring-free, comment-free stream ('' for source that does not tokenise)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in SKIP:
                continue
            text = tok.string
            if tok.type == tokenize.NAME and not keyword.iskeyword(text) and text not in BUILTINS:
                text = "N"
            elif tok.type == tokenize.STRING or tok.type in (getattr(tokenize, "FSTRING_START", -1),):
                text = "S"
            elif tok.type == tokenize.NUMBER:
                text = "0"
            out.append((text, tok.start[0]))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return out


@lru_cache(maxsize=64)
def reference_source(name: str) -> tuple[str, str, int]:
    """(file, source, first line) of covlib's function `name`, its docstring left out ('' when there is none)."""
    root = paths.code_root() / "covlib"
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if f"def {name}(" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                body = node.body[1:] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body
                lines = text.splitlines(keepends=True)[body[0].lineno - 1:node.end_lineno]
                return str(path.relative_to(paths.code_root())), "".join(lines), body[0].lineno
    return "", "", 0


def shared(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> tuple[int, tuple[int, int], tuple[int, int]]:
    """Of two `tokens` streams, the tokens both share in runs of at least `MIN_BLOCK`: (how many, the first stream's
    lines, the second's)."""
    a = a[:MAX_TOKENS]
    if not a or not b:
        return 0, (0, 0), (0, 0)
    blocks = [m for m in difflib.SequenceMatcher(None, [t for t, _ in a], [t for t, _ in b], autojunk=False)
              .get_matching_blocks() if m.size >= MIN_BLOCK]
    if not blocks:
        return 0, (0, 0), (0, 0)
    first, last = blocks[0], blocks[-1]
    return (sum(m.size for m in blocks), (a[first.a][1], a[last.a + last.size - 1][1]),
            (b[first.b][1], b[last.b + last.size - 1][1]))


def review_note(answer: str, names: Iterable[str]) -> str:
    """'' or, for the teacher, which lines of `answer` copy which lines of covlib's functions `names`."""
    notes, mine_tokens = [], tokens(answer)
    for name in names:
        path, source, first = reference_source(name)
        theirs_tokens = tokens(source)
        size, mine, theirs = shared(mine_tokens, theirs_tokens)
        total = len(theirs_tokens)
        if size >= MIN_TOKENS and total and size >= MIN_SHARE * total:
            notes.append(f"for review: lines {mine[0]}-{mine[1]} of the answer match covlib's {name} "
                         f"({path}, lines {first + theirs[0] - 1}-{first + theirs[1] - 1}; {size} of its {total} "
                         "tokens, names aside)")
    return "; ".join(notes)
