"""OTLP traces: `[server] otlp` points the gateway at a collector; this test is the collector (a
bare HTTP server) and decodes what arrives with OpenTelemetry's own generated protobuf classes
(opentelemetry-proto, code nobody here wrote). A tool call made through the official `mcp` client
with a W3C `traceparent` in `_meta` must come back as one span per command: a child of that
trace and span, named after the device and action, with the command's status, code and timeline
— the lamp that completed with status OK, the stalled slide with status ERROR and MOTOR_STALL.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import anyio
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = pytest.mark.anyio

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"


class Collector:
    """Every OTLP/HTTP request body received at /v1/traces, decoded."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        self.lock = threading.Lock()

    def spans(self) -> list:
        with self.lock:
            return [
                s
                for r in self.requests
                for rs in r.resource_spans
                for ss in rs.scope_spans
                for s in ss.spans
            ]


@pytest.fixture
def collector() -> Iterator[tuple[Collector, str]]:
    got = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                with got.lock:
                    got.requests.append(req)
                    got.content_types.append(self.headers.get("Content-Type", ""))
                self.send_response(200)
            else:
                self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def plant(plant: Path, collector: tuple[Collector, str]) -> Path:
    """The workshop, exporting its traces to the collector above."""
    text = plant.read_text()
    plant.write_text(text.replace("[server]\n", f'[server]\notlp = "{collector[1]}"\n', 1))
    return plant


def attrs(kvs) -> dict:
    return {kv.key: kv.value.WhichOneof("value") and getattr(kv.value, kv.value.WhichOneof("value")) for kv in kvs}


async def test_a_command_s_span_is_a_child_of_the_caller_s_trace(http_server, http_session, collector) -> None:
    got, _ = collector
    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN}-01"}
    async with http_session() as session:
        lamp = await session.call_tool("lamp_switch", {"on": True, "wait_s": 5}, meta=meta)
        assert lamp.structured_content["status"] == "completed", lamp
        slide = await session.call_tool("slide_move_to", {"target_mm": 150, "wait_s": 8}, meta=meta)
        assert slide.structured_content["error_code"] == "MOTOR_STALL", slide
    ids = {lamp.structured_content["command_id"], slide.structured_content["command_id"]}
    with anyio.fail_after(15):
        while {attrs(s.attributes).get("closedloop.command_id") for s in got.spans()} < ids:
            await anyio.sleep(0.1)
    assert set(got.content_types) == {"application/x-protobuf"}
    res = attrs(got.requests[0].resource_spans[0].resource.attributes)
    assert res["service.name"] == "closedloop" and res["closedloop.plant"] == "workshop", res
    spans = {attrs(s.attributes)["closedloop.command_id"]: s for s in got.spans()}
    lamp_span = spans[lamp.structured_content["command_id"]]
    slide_span = spans[slide.structured_content["command_id"]]
    for span in (lamp_span, slide_span):
        assert span.trace_id.hex() == TRACE_ID
        assert span.parent_span_id.hex() == PARENT_SPAN
        assert len(span.span_id) == 8 and span.span_id != bytes(8)
        assert span.end_time_unix_nano > span.start_time_unix_nano > 1_700_000_000 * 10**9
        # Within a minute of now: the times are the journal's, in nanoseconds since the epoch.
        assert abs(span.end_time_unix_nano / 1e9 - time.time()) < 60
    assert lamp_span.name == "lamp switch"
    a = attrs(lamp_span.attributes)
    assert (a["closedloop.status"], a["closedloop.verified"]) == ("completed", True), a
    assert lamp_span.status.code == 1  # STATUS_CODE_OK
    events = [e.name for e in lamp_span.events]
    assert events[:2] == ["received", "accepted"] and events[-1] == "completed", events
    assert "device_ack" in events, events
    b = attrs(slide_span.attributes)
    assert (b["closedloop.status"], b["closedloop.error_code"]) == ("failed", "MOTOR_STALL"), b
    assert slide_span.status.code == 2  # STATUS_CODE_ERROR
    assert "MOTOR_STALL" in slide_span.status.message
    # What decided it, each value with its own read time; and the reading that showed the fault
    # stands before the stop it caused, in order and in time.
    evidence = json.loads(b["closedloop.evidence"])
    assert evidence["fault"]["value"] is True and evidence["fault"]["at"].endswith("Z"), evidence
    events = list(slide_span.events)
    data = [json.loads(attrs(e.attributes).get("closedloop.data", "{}")) for e in events]
    fault = next(i for i, e in enumerate(events) if e.name == "signal" and data[i]["values"].get("fault") is True)
    stop = next(i for i, e in enumerate(events) if e.name == "cancel_sent")
    assert fault < stop, [e.name for e in events]
    assert events[fault].time_unix_nano <= events[stop].time_unix_nano, (events[fault], events[stop])


async def test_without_a_traceparent_each_command_is_its_own_trace(http_server, http_session, collector) -> None:
    got, _ = collector
    async with http_session() as session:
        lamp = await session.call_tool("lamp_switch", {"on": True, "wait_s": 5})
        assert lamp.structured_content["status"] == "completed", lamp
    cid = lamp.structured_content["command_id"]
    with anyio.fail_after(15):
        while not [s for s in got.spans() if attrs(s.attributes).get("closedloop.command_id") == cid]:
            await anyio.sleep(0.1)
    span = [s for s in got.spans() if attrs(s.attributes)["closedloop.command_id"] == cid][0]
    assert span.trace_id.hex() == cid.replace("-", "")
    assert span.parent_span_id == b""
