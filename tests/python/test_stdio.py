"""End-to-end: the official Python `mcp` 2.3 client drives `closedloop serve` over stdio.

Every test spawns its own server on a fresh copy of examples/workshop.toml (see conftest.py), so
the simulated devices start from power-on and the journal is the test's own.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

pytestmark = pytest.mark.anyio

ACTION_TOOLS = {
    "lamp_switch": True,  # tool name -> idempotentHint the plant file declares
    "slide_move_to": False,
    "slide_reset": True,
    "gripper_close": True,
    "fan_switch": True,
    "buzzer_switch": True,
    "oven_set_temperature": True,
}
FIXED_TOOLS = {
    "get_command_status",
    "cancel_command",
    "list_commands",
    "list_devices",
    "get_device_state",
    "confirm_command",
}
TERMINAL = {"completed", "failed", "timeout", "sent", "rejected", "cancelled"}
ERROR_STATUSES = {"rejected", "failed", "timeout"}


def text_of(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def check_result(result: CallToolResult) -> dict[str, Any]:
    """The invariants every result object keeps (docs/architecture.md), returning its structuredContent."""
    sc = result.structured_content
    assert isinstance(sc, dict), f"no structuredContent: {result}"
    assert text_of(result).strip(), f"empty text content: {result}"
    status = sc["status"]
    assert status in TERMINAL | {"accepted", "running"}, sc
    assert result.is_error == (status in ERROR_STATUSES), sc
    has_code = status in {"rejected", "failed", "timeout", "cancelled"}
    assert (sc.get("error_code") is not None) == has_code, sc
    assert (sc.get("detail") is not None) == has_code, sc
    if status in {"accepted", "running"}:
        assert isinstance(sc.get("estimated_remaining_seconds"), (int, float)), sc
    else:
        assert sc.get("estimated_remaining_seconds") is None, sc
    return sc


async def call(session: ClientSession, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return check_result(await session.call_tool(tool, args, **kw))


async def follow(session: ClientSession, command_id: str, limit_s: float = 20) -> dict[str, Any]:
    """Calls get_command_status until the command is terminal (bounded by limit_s)."""
    with anyio.fail_after(limit_s):
        while True:
            sc = await call(session, "get_command_status", {"command_id": command_id, "wait_s": 3})
            assert sc["command_id"] == command_id
            if sc["status"] in TERMINAL:
                return sc


async def test_initialize_and_list_tools(server) -> None:
    """The handshake works and tools/list offers one tool per plant action plus the fixed tools,
    each action tool with an outputSchema, wait_s/idempotency_key, and the plant's annotations."""
    async with server() as session:
        assert session.initialize_result is not None
        assert session.initialize_result.capabilities.tools is not None
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == set(ACTION_TOOLS) | FIXED_TOOLS
        for name, idempotent in ACTION_TOOLS.items():
            tool = tools[name]
            assert tool.description, name
            assert tool.output_schema and tool.output_schema.get("type") == "object", name
            props = tool.input_schema.get("properties", {})
            assert {"wait_s", "idempotency_key"} <= set(props), name
            ann = tool.annotations
            assert ann is not None, name
            assert ann.read_only_hint is False, name
            assert isinstance(ann.destructive_hint, bool), name
            assert ann.idempotent_hint is idempotent, name
        for name in FIXED_TOOLS:
            assert tools[name].output_schema, name


async def test_lamp_switch_accepted_then_completed_with_evidence(server, plant) -> None:
    """Without wait_s the call returns at once (accepted/running, or completed if already
    confirmed); get_command_status then reports completed, verified, with the contact as evidence.
    The journal lands beside the tmp plant file, not in the clone."""
    async with server() as session:
        result = await session.call_tool("lamp_switch", {"on": True})
        first = check_result(result)
        assert result.is_error is False
        assert first["status"] in {"accepted", "running", "completed"}
        assert first["device"] == "lamp" and first["action"] == "switch"
        uuid.UUID(first["command_id"])
        final = await follow(session, first["command_id"])
        assert final["status"] == "completed"
        assert final["verified"] is True
        assert final["evidence"]["contact"]["value"] is True
        events = [e["event"] for e in final["timeline"]]
        assert events[-1] == "completed" and "accepted" in events
    assert list(plant.parent.glob("workshop.db*")), sorted(p.name for p in plant.parent.iterdir())


async def test_slide_stalls_then_gripper_interlock(server) -> None:
    """A move past the stall point fails MOTOR_STALL (isError) with the position the hardware
    reported (~70 mm); the gripper is then refused INTERLOCK because the slide is faulted."""
    async with server() as session:
        result = await session.call_tool("slide_move_to", {"target_mm": 150, "wait_s": 5})
        sc = check_result(result)
        assert result.is_error is True
        assert sc["status"] == "failed" and sc["error_code"] == "MOTOR_STALL", sc
        assert abs(sc["evidence"]["position_mm"]["value"] - 70.0) <= 0.5, sc["evidence"]
        assert sc["hint"]

        result = await session.call_tool("gripper_close", {"wait_s": 2})
        sc = check_result(result)
        assert result.is_error is True
        assert sc["status"] == "rejected" and sc["error_code"] == "INTERLOCK", sc


async def test_fan_offline_is_rejected(server) -> None:
    """A device that never answers is refused DEVICE_OFFLINE; nothing is reported as done."""
    async with server() as session:
        result = await session.call_tool("fan_switch", {"on": True, "wait_s": 2})
        sc = check_result(result)
        assert result.is_error is True
        assert sc["status"] == "rejected" and sc["error_code"] == "DEVICE_OFFLINE", sc
        assert sc["hint"]


async def test_buzzer_without_feedback_is_sent_not_verified(server) -> None:
    """An action with verification = none ends `sent`, verified false, with a hint saying the
    effect could not be confirmed; it is not an error."""
    async with server() as session:
        result = await session.call_tool("buzzer_switch", {"on": True, "wait_s": 2})
        sc = check_result(result)
        assert result.is_error is False
        assert sc["status"] == "sent", sc
        assert sc["verified"] is False
        assert sc["hint"]


async def test_unknown_command_id(server) -> None:
    """get_command_status for an id no command has is an isError result UNKNOWN_COMMAND,
    not a JSON-RPC error."""
    async with server() as session:
        result = await session.call_tool("get_command_status", {"command_id": str(uuid.uuid4()), "wait_s": 0})
        assert result.is_error is True
        assert text_of(result).strip()
        assert isinstance(result.structured_content, dict), result
        assert result.structured_content["error_code"] == "UNKNOWN_COMMAND"


async def test_unknown_tool_is_protocol_error(server) -> None:
    """Calling a tool that does not exist raises MCPError (a JSON-RPC error), not a tool result."""
    async with server() as session:
        with pytest.raises(MCPError):
            await session.call_tool("no_such_tool", {})


async def test_status_wait_sends_progress(server) -> None:
    """get_command_status on a running oven command, called with a progress callback (so the
    request carries a progress token), receives progress notifications with increasing progress
    while it waits, and returns completed once the oven reached its setpoint."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with server() as session:
        first = await call(session, "oven_set_temperature", {"setpoint_c": 35.0})
        assert first["status"] in {"accepted", "running"}, first
        sc = await call(
            session,
            "get_command_status",
            {"command_id": first["command_id"], "wait_s": 10},
            progress_callback=on_progress,
        )
        assert seen, "no progress notification arrived while get_command_status waited"
        values = [p for p, _, _ in seen]
        assert values == sorted(values) and len(set(values)) == len(values), values
        if sc["status"] != "completed":
            sc = await follow(session, first["command_id"])
        assert sc["status"] == "completed" and sc["verified"] is True, sc
        assert abs(sc["evidence"]["temperature_c"]["value"] - 35.0) <= 0.5


async def test_text_content_is_worded_for_a_model(server) -> None:
    """The text content beside the structured result is non-empty and names what happened."""
    async with server() as session:
        result = await session.call_tool("lamp_switch", {"on": True, "wait_s": 2})
        text = text_of(result)
        assert text.strip()
        assert "lamp" in text.lower()
