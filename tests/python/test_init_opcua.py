"""`closedloop init --opcua` held to an asyncua server (opcua/pump_skid_server.py): the pump skid's
address space becomes a plant — variables as signals with their engineering units, the writable
setpoint as an action bounded by its EURange, methods as call actions with their input arguments
— and through it `closedloop serve` writes the setpoint (completed, read back from the node) and
calls Start() (sent), each checked against the server's own state.

A missing prerequisite (asyncua) fails the test; nothing here skips.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from support import Lines, act, call, outcome, require, serve, stop

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
SKID = HERE / "opcua" / "pump_skid_server.py"


class Skid:
    def __init__(self, log: Path) -> None:
        require("asyncua")
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen([sys.executable, str(SKID)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, text=True, bufsize=1)
        self.lines = Lines(self.proc, log)
        self.endpoint = self.lines.next(60, "pump_skid_server.py announcing its endpoint")

    def state(self) -> dict[str, str]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("state?\n")
        self.proc.stdin.flush()
        answer = self.lines.next(5, "pump_skid_server.py answering state?")
        assert answer.startswith("ok state? "), answer
        return dict(kv.split("=") for kv in answer.removeprefix("ok state? ").split())


@pytest.fixture
def skid(tmp_path: Path) -> Iterator[Skid]:
    s = Skid(tmp_path / "skid.log")
    try:
        yield s
    finally:
        stop(s.proc)


async def test_a_pump_skid_surveyed_becomes_a_plant_that_writes_and_calls(
    closedloop_bin: Path, tmp_path: Path, skid: Skid, request: pytest.FixtureRequest
) -> None:
    plant = tmp_path / "plant.toml"
    made = subprocess.run(
        [str(closedloop_bin), "init", "--opcua", skid.endpoint, "--out", str(plant)],
        capture_output=True, text=True, timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert f"wrote {plant}: 1 devices, 4 signals, 4 actions, 2 skipped" in made.stderr, made.stderr
    assert "pump_skid: Mode (ns=2;s=PumpSkid.Mode) is a String, which a signal cannot hold" in made.stderr
    assert "its argument steps is an array of Double, which a parameter cannot be" in made.stderr
    text = plant.read_text(encoding="utf-8")
    for want in [
        'description = "Pump skid 1: a centrifugal pump, its drive and its pressure sensor"',
        'speed = { node = "ns=2;s=PumpSkid.Speed", unit = "rpm"',
        'pressure = { node = "ns=2;s=PumpSkid.Pressure", unit = "bar"',
        'running = { node = "ns=2;s=PumpSkid.Running", type = "bool"',
        'params = { value = { type = "number", min = 0.0, max = 3000.0, unit = "rpm"',
        'write = [{ method = "ns=2;s=PumpSkid.SetMode", object = "ns=2;s=PumpSkid", args = ["params.mode"] }]',
        'mode = { type = "integer", description = "0 manual, 1 auto" }',
    ]:
        assert want in text, f"{want}\n{text}"
    async with serve(closedloop_bin, plant, request) as session:
        with anyio.fail_after(20):
            while (await call(session, "get_device_state", {"device": "pump_skid"}))["liveness"] != "online":
                await anyio.sleep(0.1)
        sc = await act(session, "pump_skid_set_speed_setpoint", {"value": 1200.0})
        assert outcome(sc) == ("completed", None), sc
        # Read back from the node it wrote: the node holds it, said as readback (issue 56).
        assert (sc["verified"], sc["verification"], sc["readback_matched"]) == (False, "readback", True), sc
        assert sc["evidence"]["ns=2;s=PumpSkid.SpeedSetpoint"]["value"] == 1200.0, sc
        assert float(skid.state()["setpoint"]) == 1200.0
        refused = await call(session, "pump_skid_set_speed_setpoint", {"value": 5000.0})
        assert outcome(refused) == ("rejected", "INVALID_PARAMS"), refused
        sc = await act(session, "pump_skid_start", {})
        assert outcome(sc) == ("sent", None) and sc["verified"] is False, sc
        assert skid.state()["running"] == "true"
        sc = await act(session, "pump_skid_set_mode", {"mode": 1})
        assert outcome(sc) == ("sent", None), sc
        assert skid.state()["mode"] == "1"
