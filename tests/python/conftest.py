"""Fixtures for the stdio end-to-end tests: the closedloop binary, a throwaway plant, a session.

Tests are async and run on anyio's pytest plugin (the `mcp` SDK is built on anyio), on asyncio.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

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
