"""What the book shows of an executed notebook, made safe to open: model output is hostile input.

HTML is sanitised (no script, style or frame element, no event-handler attribute, no javascript: or data: link);
widget views show their final text or nothing (no progress bar frozen at "0%"); an image output that is not a PNG
shows a note; the absolute paths of the machine that ran the notebooks become neutral names.
"""

from __future__ import annotations

import base64
import binascii
import html
import os
import re
from pathlib import Path
from typing import Any

from covlib.core import paths

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PROGRESS = re.compile(r"\d+%\|")  # tqdm's text: "desc:  40%|####      | 4/10 [...]"
_WIDGET = "application/vnd.jupyter.widget-view+json"


def _widget_text(state: dict, model_id: str) -> str | None:
    """The final text of a widget view from the notebook's saved widget state: tqdm's HBox(description HTML, bar,
    counts HTML) reads "desc: 100%|272/272 [00:01<00:00]". None when the state was not saved."""
    model = state.get(model_id)
    if not isinstance(model, dict):
        return None
    values = []
    for child in model.get("state", {}).get("children", []) or [model_id]:
        sub = state.get(str(child).replace("IPY_MODEL_", ""), {}).get("state", {})
        value = sub.get("value")
        if isinstance(value, str) and sub.get("_model_name", "").startswith(("HTML", "Label")):
            values.append(re.sub(r"<[^>]*>", "", html.unescape(value)).replace("\u2007", " ").strip())
    text = "|".join(v for v in values if v)
    return text or None


def offline(nb: Any) -> Any:
    """Drop what would need the network to show, stderr (warnings) and progress bars (a widget view that is one, at
    whatever frame it was saved, or HTML with a <progress> element: a trainer's); another widget view shows its final text from the saved widget state, else its
    text fallback. A long line printed again (after a "name: " prefix) is cut short: "name: its start… (as above)"."""
    widgets = nb.metadata.pop("widgets", None) or {}
    state = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {}) if isinstance(widgets, dict) else {}
    for cell in nb.cells:
        if "outputs" not in cell:
            continue
        kept = []
        for out in cell.outputs:
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                continue
            data = out.get("data")
            if data and "<progress" in "".join(data.get("text/html", "")):  # a trainer's progress display
                continue
            if data and _WIDGET in data:
                view = data.pop(_WIDGET)
                final = _widget_text(state, str(view.get("model_id", ""))) if isinstance(view, dict) else None
                plain = data.get("text/plain", "")
                plain = "".join(plain) if isinstance(plain, list) else str(plain)
                if _PROGRESS.search(final or plain) or not (final or plain).strip():
                    continue
                data["text/plain"] = final or plain
            kept.append(out)
        cell.outputs = kept
    return _once(nb)


_PREFIX = re.compile(r"^(?P<prefix>[\w .()/-]{1,40}?:\s)(?P<rest>.{60,})$")  # "fever: web unavailable: ..."


def _once(nb: Any) -> Any:
    """Each long printed line (60 characters or more after a short "name: " prefix) in full the first time only."""
    seen: set[str] = set()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") != "stream":
                continue
            text = "".join(out.get("text", "")) if isinstance(out.get("text"), list) else str(out.get("text", ""))
            lines = []
            for line in text.split("\n"):
                match = _PREFIX.match(line)
                key = match.group("rest") if match else (line if len(line) >= 60 else None)
                if key is not None and key in seen:
                    cut = line[:len(match.group("prefix")) + 40 if match else 40]
                    line = cut.rsplit(" ", 1)[0].rstrip(" :,;") + "… (as above)"
                elif key is not None:
                    seen.add(key)
                lines.append(line)
            out["text"] = "\n".join(lines)
    return nb


def is_png(data: bytes) -> bool:
    """Whether `data` starts like a PNG image with something after its signature."""
    return data.startswith(PNG_MAGIC) and len(data) > len(PNG_MAGIC) + 12


def check_images(nb: Any) -> Any:
    """An image/png output that does not decode to a PNG shows a note instead of a broken image."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data") or {}
            if "image/png" not in data:
                continue
            raw = data["image/png"]
            try:
                ok = is_png(base64.b64decode("".join(raw) if isinstance(raw, list) else str(raw), validate=False))
            except (binascii.Error, ValueError):
                ok = False
            if not ok:
                del data["image/png"]
                data["text/plain"] = "[image skipped: this output is not a PNG image (damaged or half-written)]"
    return nb


_TAGS = frozenset({
    "a", "abbr", "acronym", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
    "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd",
    "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table",
    "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var",
})
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml)[;,]", re.I)
_DROP_WITH_CONTENT = re.compile(r"<(script|style|iframe|object|embed|template|noscript)\b.*?(</\1\s*>|\Z)", re.I | re.S)


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if name in ("class", "id", "title", "lang", "dir", "style"):
        return True
    if tag == "a":
        return name == "href" and not value.strip().lower().startswith("data:") or name == "name"
    if tag == "img":
        return name in ("alt", "width", "height") or name == "src" and bool(_DATA_IMAGE.match(value.strip()))
    if tag in ("td", "th"):
        return name in ("colspan", "rowspan", "align", "scope")
    if tag in ("col", "colgroup"):
        return name == "span"
    if tag == "ol":
        return name in ("start", "type")
    return tag == "details" and name == "open"


def sanitize(fragment: str) -> str:
    """An HTML fragment with nothing live left: no script, style or frame element, no event-handler attribute (onerror=,
    onclick=, ...), no javascript: or data: link; images only as inline data:image/... URIs (bleach, nbconvert's own
    sanitiser). Tables, headings, lists, code and the classes nbconvert's styling needs stay."""
    import bleach
    from bleach.css_sanitizer import CSSSanitizer

    text = _DROP_WITH_CONTENT.sub("", fragment.decode() if isinstance(fragment, bytes) else str(fragment))
    return bleach.clean(text, tags=_TAGS, attributes=_allowed_attribute, protocols={"http", "https", "mailto", "data"},
                        strip=True, strip_comments=True, css_sanitizer=CSSSanitizer())


def _path_names() -> list[tuple[str, str]]:
    """(absolute path, neutral name) for the folders of the machine that ran the notebooks, longest first."""
    names: dict[str, str] = {}

    def add(folder: Any, name: str) -> None:
        try:
            candidates = {str(Path(folder)), str(Path(folder).resolve())}
        except (OSError, RuntimeError, ValueError, TypeError):
            return
        for text in candidates:
            text = text.rstrip("/")
            if len(text) > 1 and text not in names:
                names[text] = name

    for getter, name in ((paths.data_dir, "$COVLIB_DATA"), (paths.models_dir, "$COVLIB_MODELS"),
                         (paths.cache_dir, "$COVLIB_CACHE"), (paths.root, "."), (paths.code_root, ".")):
        try:
            add(getter(), name)
        except (OSError, ValueError):  # a broken covlib.toml: those folders are not known
            pass
    add(Path.home(), "~")
    for var, name in (("COVLIB_DATA", "$COVLIB_DATA"), ("COVLIB_ROOT", "."), ("HOME", "~")):
        if os.environ.get(var):
            add(os.environ[var], name)
    return sorted(names.items(), key=lambda item: -len(item[0]))


def neutral_paths(page: str) -> str:
    """`page` with the absolute paths of this machine replaced: the repository root by relative paths, the data,
    cache and models folders by $COVLIB_DATA / $COVLIB_CACHE / $COVLIB_MODELS, the home folder by ~. Inline data:
    URIs are left alone (their base64 can spell anything)."""
    names = _path_names()
    if not names:
        return page
    lookup = dict(names)
    pattern = re.compile(r"(data:[\w/+.-]+;base64,[A-Za-z0-9+/=\s]*)|("
                         + "|".join(re.escape(p) for p, _ in names) + r")(?![\w.-])(/?)")

    def swap(match: re.Match) -> str:
        if match.group(1):
            return match.group(1)
        name, slash = lookup[match.group(2)], match.group(3)
        return ("" if slash else ".") if name == "." else name + slash

    return pattern.sub(swap, page)
