"""Trace export to OpenInference spans (OTLP/JSON), so a run opens in Phoenix: one trace per example, steps, calls.

`to_spans` turns a covlib trace (`covlib.traces`) into spans named with the OpenInference semantic conventions
(`openinference.span.kind`, `input.value`, `llm.model_name`, `retrieval.documents.N.document.*`, ...): one root
CHAIN span per example, one CHAIN span per step under it (the paper's step name), and one span per model call
under its step (generate and score: LLM; retrieve: RETRIEVER; nli: EVALUATOR). `otlp` encodes them as an OTLP
ExportTraceServiceRequest in its JSON form (ids in hex, attributes as key/AnyValue), `write_otlp_json` writes it
to a file, and `send` posts it to a collector: Phoenix's `/v1/traces` takes only `application/x-protobuf`
(phoenix/server/api/routers/v1/traces.py, `post_traces`), so `send` converts with opentelemetry-proto (which
arize-phoenix installs); `encoding="json"` posts OTLP/JSON, which an OpenTelemetry collector takes.

Ids are derived from the run name and the example id (SHA-256), so exporting a run twice gives the same spans
and Phoenix keeps the first copy (it ignores a span id it holds). Timings are not real: a trace keeps no
durations, so every example starts at the run's `started` time plus its index in seconds and its spans follow
each other one microsecond apart, in the order of the steps and calls.

    python -m covlib.traces.export results/traces/<notebook>/<run>.jsonl --send http://localhost:6006/v1/traces
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from covlib import traces

PHOENIX = "http://localhost:6006/v1/traces"
SCOPE = "covlib.trace_export"
SPAN_KIND_INTERNAL = 1  # OTLP Span.SpanKind: every covlib span is in-process work
STATUS_OK = 1  # OTLP Status.StatusCode
KIND_OF_CALL = {"generate": "LLM", "score": "LLM", "retrieve": "RETRIEVER", "nli": "EVALUATOR"}
TEXT, JSON = "text/plain", "application/json"
PROTOBUF_HINT = ("posting to Phoenix needs OTLP protobuf: pip install opentelemetry-proto "
                 "(arize-phoenix installs it), or pass encoding='json' for a collector that takes OTLP/JSON")


# --------------------------------------------------------------------------- spans


def _hex_id(digits: int, *parts: Any) -> str:
    """A deterministic id of `digits` hex digits from `parts` (never all zeros, which OTLP treats as no id)."""
    text = hashlib.sha256("\x00".join(map(str, parts)).encode("utf-8", "surrogatepass")).hexdigest()[:digits]
    return text if text.strip("0") else "1".rjust(digits, "0")


def _start_ns(header: dict[str, Any]) -> int:
    """The run's `started` time in Unix nanoseconds (the Unix epoch when it is missing or unreadable)."""
    try:
        when = datetime.fromisoformat(str(header.get("started", "")))
    except ValueError:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


def _json(value: Any) -> str:
    """Compact JSON text of a value (NumPy and non-finite floats made plain first)."""
    return json.dumps(traces.plain(value), ensure_ascii=False, sort_keys=True)


def _io(attrs: dict[str, Any], side: str, value: Any) -> None:
    """Set `input.*` or `output.*`: a string as text, anything else as JSON; None sets nothing."""
    if value is None:
        return
    text = value if isinstance(value, str) else _json(value)
    attrs[f"{side}.value"] = text
    attrs[f"{side}.mime_type"] = TEXT if isinstance(value, str) else JSON


def _completion(call: dict[str, Any], step: dict[str, Any]) -> str | None:
    """A generate call's completion: on the call, in its step's `completion` output, or its sampled path's text."""
    if isinstance(call.get("completion"), str):
        return call["completion"]
    outputs = step.get("outputs") or {}
    generates = [c for c in step.get("calls", []) if c.get("kind") == "generate"]
    if isinstance(outputs.get("completion"), str) and len(generates) == 1:
        return outputs["completion"]
    paths, p = outputs.get("paths"), call.get("path")
    if isinstance(paths, list) and isinstance(p, int) and 0 <= p < len(paths) and isinstance(paths[p], dict):
        text = paths[p].get("text")
        return text if isinstance(text, str) else None
    return None


def _documents(call: dict[str, Any]) -> list[dict[str, Any]]:
    """A retrieve call's hits as OpenInference documents (id, content, score, the rest as metadata)."""
    hits = call.get("passages") if isinstance(call.get("passages"), list) else call.get("sentences") or []
    out = []
    for hit in hits:
        hit = hit if isinstance(hit, dict) else {"text": str(hit)}
        doc = {"content": hit.get("text"), "score": hit.get("score")}
        if hit.get("id") is not None:
            doc["id"] = str(hit["id"])
        rest = {k: v for k, v in hit.items() if k not in ("id", "text", "score")}
        if rest:
            doc["metadata"] = _json(rest)
        out.append(doc)
    return out


def _call_attributes(trace: traces.Trace, call: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    """The OpenInference attributes of one model call's span."""
    kind = call.get("kind")
    attrs: dict[str, Any] = {"openinference.span.kind": KIND_OF_CALL.get(kind, "UNKNOWN"), "covlib.call.kind": kind}
    if call.get("key") is not None:
        attrs["covlib.cache_key"] = call["key"]
    shown = {"kind", "key", "prompt", "model", "completion", "passages", "sentences", "query"}
    if kind in ("generate", "score"):
        prompt = trace.prompt_text(call.get("prompt"))
        attrs["llm.model_name"] = call.get("model") or trace.header.get("model") or "unknown"
        _io(attrs, "input", prompt)
        attrs["llm.input_messages.0.message.role"] = "user"
        attrs["llm.input_messages.0.message.content"] = prompt
        answer = _completion(call, step) if kind == "generate" else call.get("continuation")
        if kind == "score":
            shown.add("continuation")
            attrs["covlib.continuation"] = answer
            attrs["covlib.scored"] = "the log-probability of the continuation after the prompt (no text generated)"
        elif answer is not None:
            attrs["llm.output_messages.0.message.role"] = "assistant"
            attrs["llm.output_messages.0.message.content"] = answer
        _io(attrs, "output", answer)
    elif kind == "retrieve":
        _io(attrs, "input", call.get("query"))
        for n, doc in enumerate(_documents(call)):
            for name, value in doc.items():
                attrs[f"retrieval.documents.{n}.document.{name}"] = value
    elif kind == "nli":
        shown.add("entailed")
        _io(attrs, "input", {k: v for k, v in call.items() if k not in shown})
        _io(attrs, "output", {"entailed": call.get("entailed")})
    rest = {k: v for k, v in call.items() if k not in shown}
    if rest:
        attrs["metadata"] = _json(rest)
    return attrs


def _span(trace_id: str, span_id: str, parent: str | None, name: str, start: int, attrs: dict[str, Any]) -> dict:
    """One span record (its end time is filled in once its children are laid out)."""
    return {"trace_id": trace_id, "span_id": span_id, "parent_id": parent, "name": name,
            "start_ns": start, "end_ns": start, "attributes": {k: v for k, v in attrs.items() if v is not None}}


def _example_spans(trace: traces.Trace, record: dict[str, Any], base_ns: int) -> list[dict[str, Any]]:
    """The spans of one example: its root, its steps, their calls (pre-order, parents first)."""
    header, run = trace.header, trace.header.get("run", trace.path.stem)
    example = str(record.get("id"))
    trace_id = _hex_id(32, run, example)
    origin = base_ns + int(record.get("index", 0)) * 1_000_000_000
    tick = iter(range(1, 1 << 30))
    papers = {s.get("name"): s.get("paper") for s in header.get("steps", []) if isinstance(s, dict)}
    meta = {"run": run, "paper": header.get("paper"), "method": header.get("method"), "title": trace.title,
            "example": example, "index": record.get("index"), "gold": record.get("gold"),
            "correct": record.get("correct"), "before": record.get("before"), "flags": record.get("flags"),
            "params": header.get("params"), "model": header.get("model"), "commit": header.get("commit")}
    attrs: dict[str, Any] = {"openinference.span.kind": "CHAIN", "metadata": _json(meta), "covlib.run": run,
                             "covlib.example_id": example, "covlib.gold": [str(g) for g in record.get("gold") or []],
                             "covlib.correct": record.get("correct"), "covlib.flags": _json(record.get("flags") or {}),
                             "covlib.params": _json(header.get("params") or {})}
    _io(attrs, "input", record.get("question"))
    _io(attrs, "output", record.get("prediction"))
    root = _span(trace_id, _hex_id(16, run, example, "root"), None, f"{trace.title} | {example}", origin, attrs)
    spans = [root]
    for s, step in enumerate(record.get("steps", [])):
        name = str(step.get("name"))
        step_attrs = {"openinference.span.kind": "CHAIN", "covlib.step.paper": papers.get(name)}
        _io(step_attrs, "input", step.get("inputs") or {})
        _io(step_attrs, "output", step.get("outputs") or {})
        sid = _hex_id(16, run, example, s)
        parent = _span(trace_id, sid, root["span_id"], name, origin + next(tick) * 1000, step_attrs)
        spans.append(parent)
        for c, call in enumerate(step.get("calls", [])):
            start = origin + next(tick) * 1000
            span = _span(trace_id, _hex_id(16, run, example, s, c), sid, str(call.get("kind")), start,
                         _call_attributes(trace, call, step))
            span["end_ns"] = origin + next(tick) * 1000
            spans.append(span)
        parent["end_ns"] = origin + next(tick) * 1000
    root["end_ns"] = origin + next(tick) * 1000
    return spans


def _trace(trace: traces.Trace | str | Path) -> traces.Trace:
    """A trace, read from its file when given a path."""
    return trace if isinstance(trace, traces.Trace) else traces.read(trace)


def to_spans(trace: traces.Trace | str | Path) -> list[dict[str, Any]]:
    """Every example's spans: {trace_id, span_id, parent_id, name, start_ns, end_ns, attributes (OpenInference)}."""
    trace = _trace(trace)
    base = _start_ns(trace.header)
    return [span for record in trace.records for span in _example_spans(trace, record, base)]


# --------------------------------------------------------------------------- OTLP


def any_value(value: Any) -> dict[str, Any]:
    """An OTLP AnyValue in its JSON form (int64 as a string; a list as an array; a dict as JSON text)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"stringValue": _json(value)}


def _key_values(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """Attributes as OTLP KeyValues, None left out."""
    return [{"key": k, "value": any_value(v)} for k, v in attrs.items() if v is not None]


def project_of(trace: traces.Trace) -> str:
    """The Phoenix project a run goes to: its notebook's name ("covlib" when it has none)."""
    return trace.header.get("notebook") or "covlib"


def otlp(trace: traces.Trace | str | Path, project: str | None = None) -> dict[str, Any]:
    """The OTLP ExportTraceServiceRequest of a run, in OTLP/JSON (resourceSpans > scopeSpans > spans)."""
    trace = _trace(trace)
    spans = []
    for s in to_spans(trace):
        span = {"traceId": s["trace_id"], "spanId": s["span_id"], "name": s["name"], "kind": SPAN_KIND_INTERNAL,
                "startTimeUnixNano": str(s["start_ns"]), "endTimeUnixNano": str(s["end_ns"]),
                "attributes": _key_values(s["attributes"]), "status": {"code": STATUS_OK}}
        if s["parent_id"]:
            span["parentSpanId"] = s["parent_id"]
        spans.append(span)
    resource = {"service.name": "covlib", "openinference.project.name": project or project_of(trace),
                "covlib.run": trace.header.get("run"), "covlib.paper": trace.header.get("paper"),
                "covlib.commit": trace.header.get("commit")}
    return {"resourceSpans": [{"resource": {"attributes": _key_values(resource)},
                               "scopeSpans": [{"scope": {"name": SCOPE, "version": str(traces.VERSION)},
                                               "spans": spans}]}]}


def write_otlp_json(trace: traces.Trace | str | Path, path: str | Path, project: str | None = None) -> Path:
    """Write a run's OTLP/JSON export to `path` (one JSON object) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(otlp(trace, project), ensure_ascii=False), encoding="utf-8")
    return path


def _base64_ids(obj: Any) -> Any:
    """The request with hex ids as base64 (OTLP/JSON writes ids in hex; protobuf's JSON parser reads base64)."""
    if isinstance(obj, list):
        return [_base64_ids(v) for v in obj]
    if isinstance(obj, dict):
        return {k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId")
                and isinstance(v, str) else _base64_ids(v) for k, v in obj.items()}
    return obj


def to_protobuf(request: dict[str, Any]) -> bytes:
    """An OTLP/JSON request as serialized ExportTraceServiceRequest protobuf (needs opentelemetry-proto)."""
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError as err:
        raise ImportError(PROTOBUF_HINT) from err
    return json_format.ParseDict(_base64_ids(request), ExportTraceServiceRequest()).SerializeToString()


def _request(source: traces.Trace | str | Path | dict, project: str | None) -> dict[str, Any]:
    """The OTLP/JSON request of a trace, a trace file, an exported .json file, or a request already built."""
    if isinstance(source, dict):
        return source
    if isinstance(source, (str, Path)) and Path(source).suffix == ".json":
        request = json.loads(Path(source).read_text(encoding="utf-8"))
        if "resourceSpans" not in request:
            raise ValueError(f"{source}: not an OTLP/JSON export (no resourceSpans)")
        return request
    return otlp(source, project)


def send(source: traces.Trace | str | Path | dict, endpoint: str = PHOENIX, encoding: str = "protobuf",
         project: str | None = None, timeout: float = 30.0) -> int:
    """POST a run's spans to an OTLP/HTTP endpoint (Phoenix by default) and return the HTTP status.

    `source` is a trace, a trace file (.jsonl), or an export written by `write_otlp_json` (.json). Phoenix takes
    only protobuf; `encoding="json"` sends OTLP/JSON to a collector that takes it. `project` (the notebook's
    name by default) names the Phoenix project; it does not change an export read from a .json file.
    """
    if encoding not in ("protobuf", "json"):
        raise ValueError(f"encoding is 'protobuf' or 'json', not {encoding!r}")
    request = _request(source, project)
    if encoding == "protobuf":
        body, kind = to_protobuf(request), "application/x-protobuf"
    else:
        body, kind = json.dumps(request, ensure_ascii=False).encode("utf-8"), "application/json"
    post = urllib.request.Request(endpoint, data=body, method="POST", headers={"Content-Type": kind})
    try:
        with urllib.request.urlopen(post, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        detail = err.read()[:300].decode("utf-8", "replace")
        raise RuntimeError(f"{endpoint} answered {err.code}: {detail}") from err
    except urllib.error.URLError as err:
        raise RuntimeError(f"nothing answers at {endpoint} ({err.reason}); start Phoenix with `phoenix serve`") from err


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: export a trace file to OTLP/JSON, and optionally send it to Phoenix."""
    parser = argparse.ArgumentParser(prog="python -m covlib.traces.export", description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a trace file, results/traces/<notebook>/<run>.jsonl")
    parser.add_argument("--out", help="where to write the OTLP/JSON export (default: <trace>.otlp.json)")
    parser.add_argument("--send", nargs="?", const=PHOENIX, metavar="URL",
                        help=f"POST the spans to an OTLP/HTTP endpoint (default {PHOENIX})")
    parser.add_argument("--json", action="store_true", help="send OTLP/JSON instead of protobuf (not for Phoenix)")
    parser.add_argument("--project", help="the Phoenix project (default: the notebook's name)")
    args = parser.parse_args(argv)
    trace = traces.read(args.trace)
    out = Path(args.out) if args.out else Path(args.trace).with_suffix(".otlp.json")
    write_otlp_json(trace, out, args.project)
    print(f"{len(trace.records)} examples, {len(to_spans(trace))} spans -> {out}")
    if args.send:
        status = send(out, args.send, "json" if args.json else "protobuf")
        print(f"sent to {args.send}: HTTP {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
