"""End-to-end over Streamable HTTP: the official Python `mcp` 2.3 client against
`closedloop serve examples/workshop.toml --http 127.0.0.1:0`.

Every test starts its own server on a fresh copy of the plant, on a port the OS picks, and stops
it with SIGTERM at teardown, where it must exit 0 (see `http_server` in conftest.py).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.types import CallToolResult, TextContent

pytestmark = pytest.mark.anyio

TERMINAL = {"completed", "failed", "timeout", "sent", "rejected", "cancelled"}
ERROR_STATUSES = {"rejected", "failed", "timeout"}


def text_of(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def check_result(result: CallToolResult) -> dict[str, Any]:
    """The invariants of every result object (docs/architecture.md); returns its structuredContent."""
    sc = result.structured_content
    assert isinstance(sc, dict), f"no structuredContent: {result}"
    assert text_of(result).strip(), f"empty text content: {result}"
    assert sc["status"] in TERMINAL | {"accepted", "running"}, sc
    assert result.is_error == (sc["status"] in ERROR_STATUSES), sc
    return sc


async def follow(session: ClientSession, command_id: str, limit_s: float = 20) -> dict[str, Any]:
    """Calls get_command_status until the command is terminal (bounded by limit_s)."""
    with anyio.fail_after(limit_s):
        while True:
            result = await session.call_tool("get_command_status", {"command_id": command_id, "wait_s": 3})
            sc = check_result(result)
            assert sc["command_id"] == command_id, sc
            if sc["status"] in TERMINAL:
                return sc


async def test_initialize_and_list_tools(http_session) -> None:
    """The 2025-era handshake works over HTTP and tools/list offers the plant's action tools and
    the fixed tools, each with an outputSchema."""
    async with http_session() as session:
        init = session.initialize_result
        assert init is not None
        assert init.server_info.name == "closedloop"
        assert init.capabilities.tools is not None
        tools = {t.name: t for t in (await session.list_tools()).tools}
        expected = {
            "lamp_switch",
            "slide_move_to",
            "gripper_close",
            "fan_switch",
            "buzzer_switch",
            "oven_set_temperature",
            "get_command_status",
            "cancel_command",
            "list_commands",
            "list_devices",
            "get_device_state",
        }
        assert expected <= set(tools), sorted(tools)
        for name in expected:
            assert tools[name].output_schema, name


async def test_lamp_switch_followed_to_completed(http_session) -> None:
    """lamp_switch returns at once (not yet known to be done); get_command_status then reports
    completed, verified, with the lamp's contact as evidence in structuredContent."""
    async with http_session() as session:
        result = await session.call_tool("lamp_switch", {"on": True})
        first = check_result(result)
        assert result.is_error is False, first
        assert first["status"] in {"accepted", "running", "completed"}, first
        assert first["device"] == "lamp" and first["action"] == "switch", first
        command_id = first["command_id"]
        uuid.UUID(command_id)

        final = await follow(session, command_id)
        assert final["status"] == "completed", final
        assert final["verified"] is True, final
        assert final["verification"] == "feedback", final
        assert final["params"] == {"on": True}, final
        assert final["evidence"]["contact"]["value"] is True, final
        assert final["estimated_remaining_seconds"] is None, final
        assert final.get("error_code") is None, final
        events = [e["event"] for e in final["timeline"]]
        assert events[-1] == "completed" and "accepted" in events and "dispatched" in events, events


async def test_slide_move_stalls(http_session) -> None:
    """A move past the stall point fails MOTOR_STALL as an isError tool result, with the position
    the drive reported (~70 mm) and a hint."""
    async with http_session() as session:
        result = await session.call_tool("slide_move_to", {"target_mm": 150, "wait_s": 5})
        sc = check_result(result)
        if sc["status"] not in TERMINAL:
            sc = await follow(session, sc["command_id"])
            assert sc["status"] == "failed", sc
        else:
            assert result.is_error is True, sc
        assert sc["status"] == "failed" and sc["error_code"] == "MOTOR_STALL", sc
        assert sc["detail"] and sc["hint"], sc
        assert abs(sc["evidence"]["position_mm"]["value"] - 70.0) <= 0.5, sc["evidence"]


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


async def test_foreign_origin_is_forbidden(http_server) -> None:
    """A browser page from another origin gets 403 (DNS-rebinding protection); the same request
    from a loopback page, or with no Origin at all, is served."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "origin-probe", "version": "0"},
        },
    }
    url = http_server.url
    port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    for origin in ("http://evil.example", "https://evil.example", "null"):
        status, body = await anyio.to_thread.run_sync(_post, url, init, {"Origin": origin})
        assert status == 403, (origin, status, body)
    for headers in ({}, {"Origin": f"http://127.0.0.1:{port}"}, {"Origin": "http://localhost:5173"}):
        status, body = await anyio.to_thread.run_sync(_post, url, init, headers)
        assert status == 200, (headers, status, body)
        assert '"protocolVersion"' in body, body


async def test_status_wait_sends_progress(http_session) -> None:
    """get_command_status on a running oven command, called with a progress callback (so the
    request carries a progress token), receives increasing progress notifications over the
    POST's SSE stream while it waits, and the oven ends completed at its setpoint."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with http_session() as session:
        first = check_result(await session.call_tool("oven_set_temperature", {"setpoint_c": 35.0}))
        assert first["status"] in {"accepted", "running"}, first
        result = await session.call_tool(
            "get_command_status",
            {"command_id": first["command_id"], "wait_s": 10},
            progress_callback=on_progress,
        )
        sc = check_result(result)
        assert seen, "no progress notification arrived while get_command_status waited"
        values = [p for p, _, _ in seen]
        assert values == sorted(values) and len(set(values)) == len(values), values
        if sc["status"] != "completed":
            sc = await follow(session, first["command_id"])
        assert sc["status"] == "completed" and sc["verified"] is True, sc
        assert abs(sc["evidence"]["temperature_c"]["value"] - 35.0) <= 0.5, sc["evidence"]


async def test_closing_a_session_logs_no_failure_in_the_official_sdk(
    http_session, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 56: the SDK's DELETE at the end of a session got 202, and the SDK logged "Session
    termination failed: 202" every time; closedloop answers 200, as the SDKs expect."""
    caplog.set_level("DEBUG", logger="mcp.client.streamable_http")
    async with http_session() as session:
        await session.list_tools()
    messages = [r.getMessage() for r in caplog.records if r.name == "mcp.client.streamable_http"]
    assert not [m for m in messages if "Session termination failed" in m], messages
