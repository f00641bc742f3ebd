"""Fixtures for the end-to-end tests: the closedloop binary, a throwaway plant, a session over
stdio (`server`) or over Streamable HTTP (`http_server`, `http_session`).

Tests are async and run on anyio's pytest plugin (the `mcp` SDK is built on anyio), on asyncio.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import PtyPair
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = "/var/tmp/closedloop-target/debug/closedloop"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def closedloop_bin() -> Path:
    """The binary under test: $CLOSEDLOOP_BIN, else the default cargo target dir's debug build."""
    path = Path(os.environ.get("CLOSEDLOOP_BIN", DEFAULT_BIN))
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"closedloop binary not found or not executable at {path}. Build it with "
            "`CARGO_TARGET_DIR=/var/tmp/closedloop-target cargo build -p closedloop` "
            "or set CLOSEDLOOP_BIN (scripts/test-python does both).",
            pytrace=False,
        )
    return path


@pytest.fixture
def plant(tmp_path: Path) -> Path:
    """examples/workshop.toml copied into a fresh tmp dir, so its relative journal lands there."""
    dst = tmp_path / "workshop.toml"
    shutil.copyfile(REPO / "examples" / "workshop.toml", dst)
    return dst


@pytest.fixture
def server(
    closedloop_bin: Path, plant: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[[], AbstractAsyncContextManager[ClientSession]]]:
    """A factory: `async with server() as session:` spawns `closedloop serve PLANT` over stdio
    (cwd = the plant's tmp dir) and yields an initialized ClientSession. The server's stderr is
    kept in server.log beside the plant and attached to the test's report."""
    log_path = plant.parent / "server.log"

    @asynccontextmanager
    async def connect() -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(
            command=str(closedloop_bin), args=["serve", str(plant)], cwd=str(plant.parent)
        )
        with open(log_path, "a", encoding="utf-8") as log:
            async with stdio_client(params, errlog=log) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=30) as session:
                    await session.initialize()
                    yield session

    yield connect
    if log_path.exists():
        text = log_path.read_text(encoding="utf-8", errors="replace")
        request.node.add_report_section("call", "closedloop stderr", text[-20000:])


# The one line `closedloop serve --http` prints on stderr once it listens (crates/cli/src/serve.rs).
LISTENING = re.compile(r"closedloop: listening on (http://\S+)")


@dataclass
class HttpServer:
    url: str  # the MCP endpoint, http://127.0.0.1:PORT/mcp
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture
def http_server(
    closedloop_bin: Path, plant: Path, request: pytest.FixtureRequest
) -> Iterator[HttpServer]:
    """`closedloop serve PLANT --http 127.0.0.1:0` (cwd = the plant's tmp dir), on a port the OS
    picks, read from the server's stderr (kept in server-http.log and attached to the report).
    At teardown it gets SIGTERM and must exit 0 within 15 s."""
    log_path = plant.parent / "server-http.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(closedloop_bin), "serve", str(plant), "--http", "127.0.0.1:0"],
            cwd=plant.parent,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )

    def log_text() -> str:
        return log_path.read_text(encoding="utf-8", errors="replace")

    try:
        deadline = time.monotonic() + 60
        while (m := LISTENING.search(log_text())) is None:
            if proc.poll() is not None:
                pytest.fail(f"closedloop serve --http exited {proc.returncode} before listening:\n{log_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"closedloop serve --http printed no address within 60 s:\n{log_text()}")
            time.sleep(0.05)
        yield HttpServer(url=m.group(1), process=proc, log=log_path)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                request.node.add_report_section("teardown", "closedloop stderr", log_text()[-20000:])
                pytest.fail("closedloop serve --http did not exit within 15 s of SIGTERM")
        request.node.add_report_section("teardown", "closedloop stderr", log_text()[-20000:])
    assert proc.returncode == 0, f"closedloop serve --http exited {proc.returncode} on SIGTERM, not 0"


@pytest.fixture
def http_session(
    http_server: HttpServer,
) -> Callable[[], AbstractAsyncContextManager[ClientSession]]:
    """A factory: `async with http_session() as session:` connects the `mcp` client's Streamable
    HTTP transport to `http_server` and yields an initialized ClientSession."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[ClientSession]:
        async with streamable_http_client(http_server.url) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30) as session:
                await session.initialize()
                yield session

    return connect


@pytest.fixture
def pty_pair() -> Iterator[PtyPair]:
    """A socat pty pair, its two paths read from socat's stderr."""
    if shutil.which("socat") is None:
        pytest.fail("socat is not installed; it is a test prerequisite (scripts/system-deps)", pytrace=False)
    proc = subprocess.Popen(
        ["socat", "-d", "-d", "pty,raw,echo=0", "pty,raw,echo=0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    paths: list[str] = []
    assert proc.stderr is not None
    deadline = time.monotonic() + 10
    while len(paths) < 2 and time.monotonic() < deadline:
        line = proc.stderr.readline().decode(errors="replace")
        if not line:
            break
        if "PTY is " in line:
            paths.append(line.split("PTY is ", 1)[1].strip())
    if len(paths) < 2:
        proc.kill()
        pytest.fail(f"socat reported {paths} instead of two ptys", pytrace=False)
    try:
        yield PtyPair(proc, paths[0], paths[1])
    finally:
        proc.kill()
        proc.wait()
