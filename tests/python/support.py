"""Helpers shared by the end-to-end interop tests: child processes read line by line, prerequisites
that fail (never skip) when missing, and `closedloop serve` over stdio with the `mcp` client.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

TERMINAL = {"completed", "failed", "timeout", "sent", "rejected", "cancelled"}
ERROR_STATUSES = {"rejected", "failed", "timeout"}


def require(module: str) -> Any:
    """Imports a prerequisite, failing (never skipping) with the way to install it."""
    try:
        return __import__(module)
    except ImportError as exc:
        pytest.fail(
            f"{module} is not importable ({exc}); it is pinned in tests/python/requirements.txt: "
            "run `bash scripts/python-env` and use its venv (scripts/test-python does both)",
            pytrace=False,
        )


class Lines:
    """A child's stdout read line by line on a thread, so waiting for a line can time out
    (select() on a buffered pipe misses lines already read into the buffer)."""

    def __init__(self, proc: subprocess.Popen[str], log: Path | None = None) -> None:
        self.proc, self.log = proc, log
        self.queue: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                self.queue.put(line)
            self.queue.put("")  # EOF

        threading.Thread(target=pump, daemon=True).start()

    def next(self, timeout_s: float, what: str) -> str:
        """The next line within timeout_s, or a failure naming what was awaited."""
        try:
            line = self.queue.get(timeout=timeout_s)
        except queue.Empty:
            line = ""
        if not line:
            self.proc.poll()
            log = self.log
            err = log.read_text(encoding="utf-8", errors="replace")[-4000:] if log and log.exists() else ""
            pytest.fail(f"{what}: no line within {timeout_s} s (exit code {self.proc.returncode})\n{err}", pytrace=False)
        return line.strip()


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def serve(closedloop_bin: Path, plant: Path, request: pytest.FixtureRequest) -> AsyncIterator[ClientSession]:
    """`closedloop serve PLANT` over stdio with the `mcp` client, as conftest.py's `server` does;
    its stderr is kept beside the plant and attached to the test's report."""
    log_path = plant.parent / "serve.log"
    params = StdioServerParameters(
        command=str(closedloop_bin), args=["serve", str(plant)], cwd=str(plant.parent),
        env={**os.environ, "CLOSEDLOOP_LOG": "info"},
    )
    try:
        with open(log_path, "a", encoding="utf-8") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=30) as session:
                    await session.initialize()
                    yield session
    finally:
        if log_path.exists():
            text = log_path.read_text(encoding="utf-8", errors="replace")
            request.node.add_report_section("call", "closedloop stderr", text[-20000:])


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call; its structuredContent, with isError consistent with the status."""
    result: CallToolResult = await session.call_tool(tool, args)
    sc = result.structured_content
    assert isinstance(sc, dict), f"{tool}: no structuredContent: {result}"
    if "status" in sc:
        assert result.is_error == (sc["status"] in ERROR_STATUSES), sc
    return sc


async def act(session: ClientSession, tool: str, args: dict[str, Any], limit_s: float = 20) -> dict[str, Any]:
    """Calls an action tool with wait_s and follows the command until it is final."""
    sc = await call(session, tool, {**args, "wait_s": 5})
    with anyio.fail_after(limit_s):
        while sc["status"] not in TERMINAL:
            sc = await call(session, "get_command_status", {"command_id": sc["command_id"], "wait_s": 3})
    return sc


def outcome(sc: dict[str, Any]) -> tuple[str, str | None]:
    return sc["status"], sc.get("error_code")


@dataclass
class PtyPair:
    """Two ends of a socat pty pair (a null-modem cable between two serial ports) and socat."""

    socat: subprocess.Popen[bytes]
    a: str
    b: str
