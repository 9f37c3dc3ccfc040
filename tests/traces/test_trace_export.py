"""The trace export to OpenInference spans in OTLP/JSON (covlib.traces.export), and its POST to a collector."""

from __future__ import annotations

import base64
import http.server
import importlib.util
import json
import re
import threading

import pytest

from covlib import traces
from covlib.traces import export as trace_export

STEPS = [("Generate", "few-shot CoT, Appendix C"), ("Retrieve", "BM25 top-2"), ("Verify", "NLI entailment"),
         ("Answer log-prob", "the answer's log-probability")]
SHOTS = "Q: who?\nA: First, x. The answer is x.\n" * 20  # a shared few-shot block, stored once as a prefix


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # its parent package is missing
        return False


HAS_PROTO = _importable("google.protobuf") and _importable("opentelemetry.proto")
NO_PROTO = "opentelemetry-proto is not installed in this environment (arize-phoenix brings it); not a dependency"


@pytest.fixture
def trace(tmp_path):
    tracer = traces.Tracer("03_verify_and_edit_tables", folder=tmp_path / "traces")
    with tracer.open_run("verify_edit", "verify_edit", "CoT-SC + VE, HotpotQA", STEPS, {"n": 2, "seed": 0},
                         model="smollm2", label="hotpotqa-bm25") as tr:
        prompts = tr.prompts([f"{SHOTS}Q: question {i}?\nA:" for i in range(2)])
        for i in range(2):
            paths = [{"text": f"path {p} of {i}", "answer": "x"} for p in range(2)]
            tr.write({"id": f"q{i}", "question": f"question {i}?", "gold": ["x"], "prediction": "x",
                      "correct": 1.0, "flags": {"parse_failures": i}, "steps": [
                          traces.step("Generate", {"question": f"question {i}?"}, {"paths": paths},
                                      [traces.call("generate", f"k{i}-{p}", prompt=prompts[i], path=p)
                                       for p in range(2)]),
                          traces.step("Retrieve", {"query": "x?"}, {"ids": ["d1", "d2"]},
                                      [traces.call("retrieve", None, query="x?", retriever="bm25", passages=[
                                          {"rank": 1, "id": "d1", "title": "X", "score": 2.5, "text": "X is x."},
                                          {"rank": 2, "id": "d2", "title": "Y", "score": 1.0, "text": "Y."}])]),
                          traces.step("Verify", {}, {"entailed": True},
                                      [traces.call("nli", "n1", metric="recall", fact=0, entailed=True)]),
                          traces.step("Answer log-prob", {}, {"answer_logprob": -0.5},
                                      [traces.call("score", "s1", prompt="Q: q?\nA:", continuation=" x.")])]})
    yield traces.read(tr.path)


def _spans(request: dict) -> list[dict]:
    return [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attrs(span: dict) -> dict:
    def value(v: dict):
        if "arrayValue" in v:
            return [value(x) for x in v["arrayValue"]["values"]]
        (kind, x), = v.items()
        return int(x) if kind == "intValue" else x
    return {kv["key"]: value(kv["value"]) for kv in span["attributes"]}


def test_the_spans_link_example_step_and_call_with_otlp_ids(trace, tmp_path):
    request = json.loads(trace_export.write_otlp_json(trace, tmp_path / "run.json").read_text())
    spans = _spans(request)
    assert len(spans) == 2 * (1 + 4 + 5), "per example: a root, four steps, five calls"
    by_id = {s["spanId"]: s for s in spans}
    assert len(by_id) == len(spans), "span ids are unique"
    for s in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", s["traceId"]) and re.fullmatch(r"[0-9a-f]{16}", s["spanId"])
        assert int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"])
    roots = [s for s in spans if "parentSpanId" not in s]
    assert [r["name"] for r in roots] == ["CoT-SC + VE, HotpotQA | q0", "CoT-SC + VE, HotpotQA | q1"]
    assert len({r["traceId"] for r in roots}) == 2, "one trace per example"
    for s in spans:
        if "parentSpanId" in s:
            parent = by_id[s["parentSpanId"]]
            assert parent["traceId"] == s["traceId"]
            kind = _attrs(s)["openinference.span.kind"]
            if kind == "CHAIN":  # a step: under its example's root
                assert "parentSpanId" not in parent and s["name"] in dict(STEPS)
            else:  # a call: under its step
                assert parent["parentSpanId"] == roots[0 if s["traceId"] == roots[0]["traceId"] else 1]["spanId"]
    steps = [s["name"] for s in spans if s.get("parentSpanId") == roots[0]["spanId"]]
    assert steps == [n for n, _ in STEPS]
    resource = {kv["key"]: kv["value"]["stringValue"] for kv in request["resourceSpans"][0]["resource"]["attributes"]}
    assert resource["openinference.project.name"] == "03_verify_and_edit_tables"


def test_span_kinds_prompts_completions_and_documents(trace):
    spans = trace_export.to_spans(trace)
    first = [s for s in spans if s["trace_id"] == spans[0]["trace_id"]]
    kinds = {s["name"]: s["attributes"]["openinference.span.kind"] for s in first if s["parent_id"]
             and s["name"] in ("generate", "retrieve", "nli", "score")}
    assert kinds == {"generate": "LLM", "retrieve": "RETRIEVER", "nli": "EVALUATOR", "score": "LLM"}
    root = first[0]["attributes"]
    assert root["input.value"] == "question 0?" and root["output.value"] == "x"
    assert root["covlib.gold"] == ["x"] and root["covlib.correct"] == 1.0
    meta = json.loads(root["metadata"])
    assert meta["flags"] == {"parse_failures": 0} and meta["params"] == {"n": 2, "seed": 0}
    llm = [s["attributes"] for s in first if s["name"] == "generate"]
    assert llm[1]["input.value"] == f"{SHOTS}Q: question 0?\nA:", "the full prompt, its shared block put back"
    assert llm[1]["llm.input_messages.0.message.content"] == llm[1]["input.value"]
    assert llm[1]["output.value"] == "path 1 of 0", "the completion of the call's sampled path"
    assert llm[1]["llm.model_name"] == "smollm2" and llm[1]["covlib.cache_key"] == "k0-1"
    ret = next(s["attributes"] for s in first if s["name"] == "retrieve")
    assert ret["input.value"] == "x?"
    assert [ret[f"retrieval.documents.{n}.document.id"] for n in range(2)] == ["d1", "d2"]
    assert ret["retrieval.documents.0.document.content"] == "X is x."
    assert ret["retrieval.documents.0.document.score"] == 2.5
    assert json.loads(ret["retrieval.documents.1.document.metadata"]) == {"rank": 2, "title": "Y"}
    nli = next(s["attributes"] for s in first if s["name"] == "nli")
    assert json.loads(nli["output.value"]) == {"entailed": True} and json.loads(nli["input.value"])["metric"] == "recall"
    score = next(s["attributes"] for s in first if s["name"] == "score")
    assert score["input.value"] == "Q: q?\nA:" and score["covlib.continuation"] == " x."
    step = next(s["attributes"] for s in first if s["name"] == "Retrieve")
    assert step["covlib.step.paper"] == "BM25 top-2" and json.loads(step["input.value"]) == {"query": "x?"}


def test_ids_and_times_are_the_same_in_two_exports(trace, tmp_path):
    a = trace_export.write_otlp_json(trace, tmp_path / "a.json").read_text()
    b = trace_export.write_otlp_json(traces.read(trace.path), tmp_path / "b.json").read_text()
    assert a == b


@pytest.mark.skipif(not HAS_PROTO, reason=NO_PROTO)
def test_the_json_is_an_export_trace_service_request(trace):
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = trace_export.otlp(trace)
    parsed = ExportTraceServiceRequest()
    parsed.ParseFromString(trace_export.to_protobuf(request))
    spans = [s for rs in parsed.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert [s.span_id.hex() for s in spans] == [s["spanId"] for s in _spans(request)], "ids stay 8 / 16 bytes"
    assert all(len(s.trace_id) == 16 for s in spans)
    again = json_format.MessageToDict(parsed)  # protobuf's own JSON: ids in base64
    assert base64.b64decode(again["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]).hex() == \
        _spans(request)[0]["traceId"]


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802 (the http.server name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def collector():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", _Recorder.seen
    server.shutdown()
    server.server_close()


def test_send_posts_otlp_json_to_a_collector(trace, tmp_path, collector):
    url, seen = collector
    exported = trace_export.write_otlp_json(trace, tmp_path / "run.json")
    assert trace_export.send(exported, url, encoding="json") == 200
    assert trace_export.send(trace.path, url, encoding="json") == 200
    (path, kind, body), (_, _, again) = seen
    assert path == "/v1/traces" and kind == "application/json"
    assert json.loads(body) == json.loads(exported.read_text()) == json.loads(again)


def test_send_posts_protobuf_as_phoenix_takes_it(trace, collector):
    url, seen = collector
    if not HAS_PROTO:
        with pytest.raises(ImportError, match="pip install opentelemetry-proto"):
            trace_export.send(trace, url)
        assert seen == []
        return
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    assert trace_export.send(trace, url) == 200
    (_, kind, body), = seen
    parsed = ExportTraceServiceRequest()
    parsed.ParseFromString(body)
    assert kind == "application/x-protobuf"
    assert len(parsed.resource_spans[0].scope_spans[0].spans) == len(trace_export.to_spans(trace))


def test_send_says_when_nothing_answers_and_the_cli_writes_the_export(trace, tmp_path, capsys):
    with pytest.raises(RuntimeError, match="nothing answers at http://127.0.0.1:9/v1/traces"):
        trace_export.send(trace, "http://127.0.0.1:9/v1/traces", encoding="json", timeout=5)
    assert trace_export.main([str(trace.path), "--out", str(tmp_path / "x.json")]) == 0
    assert "2 examples, 20 spans" in capsys.readouterr().out
    assert _spans(json.loads((tmp_path / "x.json").read_text()))[0]["name"].endswith("| q0")
