"""OPC UA interop with a stack no one here wrote (issue 6): an asyncua 2.1 server
(opcua/pump_server.py: a pump with a Speed variable, a Running flag that follows Start()/Stop()
after a delay, and methods) driven by `closedloop serve` through the `opcua` driver. It is
browsed and read through the bridge tools, its Running flag is kept fresh by a subscription,
Start is driven to `completed` on that flag, a speed write to `completed` on its read-back, and
stopping the server mid-command gives `DEVICE_OFFLINE`, never `completed`.

Issue 10: a mixer (opcua/mixer_server.py, see opcua_mixer.py) whose Start(rpm) sets Running
inside the call while the server ramps Speed: Start and a write of Setpoint judged on Setpoint
itself both complete, confirmed by reads issued after the acknowledgement.

A missing prerequisite (asyncua) fails the test; nothing here skips.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from opcua_mixer import Mixer, online, setpoint_write_completes, start_completes
from support import Lines, act, call, outcome, require, serve, stop

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
PUMP = HERE / "opcua" / "pump_server.py"
MIXER = HERE / "opcua" / "mixer_server.py"

PLANT = """
[server]
name = "opcua-interop"
journal = "sqlite://opcua.db"

[[device]]
id = "pump"
description = "Pump on an OPC UA server (asyncua)"
driver = {{ kind = "opcua", endpoint = "{endpoint}", security = "none" }}
poll_ms = 50
raw_access = true
liveness = {{ max_silence_s = 2.0 }}
[device.signals]
running   = {{ node = "ns=2;s=Pump1.Running", type = "bool" }}
speed_rpm = {{ node = "ns=2;s=Pump1.Speed", unit = "rpm" }}
[[device.action]]
name = "start"
description = "Start the pump."
params = {{}}
write = [{{ method = "ns=2;s=Pump1.Start", object = "ns=2;s=Pump1" }}]
done_when = "running"
expect_s = 0.3
idempotent = true
[[device.action]]
name = "stop"
description = "Stop the pump."
params = {{}}
write = [{{ method = "ns=2;s=Pump1.Stop", object = "ns=2;s=Pump1" }}]
done_when = "!running"
expect_s = 0.3
idempotent = true
[[device.action]]
name = "set_speed"
description = "Set the pump's speed."
params = {{ rpm = {{ type = "number", min = 0.0, max = 3000.0, unit = "rpm" }} }}
write = [{{ node = "ns=2;s=Pump1.Speed", value = "params.rpm" }}]
verification = "readback"
expect_s = 0.1
idempotent = true
"""


class Pump:
    def __init__(self, delay_ms: int, log: Path) -> None:
        require("asyncua")
        self.log = log
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(PUMP), "--delay-ms", str(delay_ms)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
            )
        self.endpoint = Lines(self.proc, log).next(30, "pump_server.py announcing its endpoint")
        assert self.endpoint.startswith("opc.tcp://"), self.endpoint


@pytest.fixture
def rig(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Pump, Path]]:
    pump = Pump(200, tmp_path / "pump.log")
    plant = tmp_path / "plant.toml"
    plant.write_text(PLANT.format(endpoint=pump.endpoint), encoding="utf-8")
    try:
        yield pump, plant
    finally:
        stop(pump.proc)
        request.node.add_report_section("teardown", "pump_server.py stderr", pump.log.read_text()[-20000:])


async def test_an_asyncua_pump_is_browsed_read_and_driven_to_completed(
    closedloop_bin: Path, rig: tuple[Pump, Path], request: pytest.FixtureRequest
) -> None:
    pump, plant = rig
    async with serve(closedloop_bin, plant, request) as session:
        with anyio.fail_after(20):
            while (await call(session, "get_device_state", {"device": "pump"}))["liveness"] != "online":
                await anyio.sleep(0.1)

        browse = await call(session, "opcua_browse", {"device": "pump", "node": "ns=2;s=Pump1"})
        ids = {e["node_id"] for e in browse["entries"]}
        assert {"ns=2;s=Pump1.Speed", "ns=2;s=Pump1.Running", "ns=2;s=Pump1.Start"} <= ids, browse
        assert browse["page"] == 0 and browse["truncated"] is False, browse
        # Deep from the root, page by page: each page bounded, the pages disjoint.
        first = await call(session, "opcua_browse", {"device": "pump", "node": "i=84", "depth": 5})
        assert len(first["entries"]) == 200 and first["truncated"] is True, len(first["entries"])
        second = await call(session, "opcua_browse", {"device": "pump", "node": "i=84", "depth": 5, "page": 1})
        assert 0 < len(second["entries"]) <= 200
        assert not {e["node_id"] for e in first["entries"]} & {e["node_id"] for e in second["entries"]}
        read = await call(session, "opcua_read", {"device": "pump", "nodes": ["ns=2;s=Pump1.SpeedLimit", "ns=2;s=Nope"]})
        by_node = {v["node"]: v for v in read["values"]}
        assert by_node["ns=2;s=Pump1.SpeedLimit"]["value"] == 1500 and by_node["ns=2;s=Pump1.SpeedLimit"]["status"] == "Good"
        assert by_node["ns=2;s=Nope"]["status"].startswith("Bad_"), read

        # Start: the method returns at once (running), Running follows 200 ms later (completed).
        sc = await act(session, "pump_start", {})
        assert outcome(sc) == ("completed", None), sc
        assert sc["verified"] is True and sc["evidence"]["running"]["value"] is True, sc
        assert sc["evidence"]["running"]["source"] == "ns=2;s=Pump1.Running", sc

        sc = await act(session, "pump_set_speed", {"rpm": 1234.5})
        assert outcome(sc) == ("completed", None), sc
        assert sc["readback_matched"] is True, sc

        sc = await act(session, "pump_stop", {})
        assert outcome(sc) == ("completed", None), sc

        # The server goes away while a start is under way: DEVICE_OFFLINE, never completed.
        sc = await call(session, "pump_start", {"wait_s": 0})
        stop(pump.proc)
        with anyio.fail_after(30):
            while sc["status"] not in ("completed", "failed", "timeout", "rejected"):
                sc = await call(session, "get_command_status", {"command_id": sc["command_id"], "wait_s": 3})
        assert sc["status"] != "completed", sc
        assert sc["error_code"] == "DEVICE_OFFLINE", sc


@pytest.fixture
def mixer_plant(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    require("asyncua")
    mixer = Mixer([sys.executable, str(MIXER)], tmp_path / "mixer.log")
    try:
        yield mixer.plant(tmp_path, "asyncua")
    finally:
        mixer.stop(request, "mixer_server.py")


async def test_an_asyncua_mixer_started_by_a_method_that_sets_running_completes(
    closedloop_bin: Path, mixer_plant: Path, request: pytest.FixtureRequest
) -> None:
    await start_completes(closedloop_bin, mixer_plant, request)


async def test_an_asyncua_setpoint_write_judged_on_its_own_node_completes(
    closedloop_bin: Path, mixer_plant: Path, request: pytest.FixtureRequest
) -> None:
    await setpoint_write_completes(closedloop_bin, mixer_plant, request)


@pytest.mark.parametrize("timestamps", ["none", "source-ahead"])
async def test_a_server_whose_timestamps_prove_nothing_is_judged_on_reads_after_the_ack(
    closedloop_bin: Path, tmp_path: Path, request: pytest.FixtureRequest, timestamps: str
) -> None:
    """The mixer on a server that stamps nothing, or only with a device clock a minute ahead: a
    subscription sample then proves nothing about when it was taken, so only reads issued after
    the acknowledgement confirm (each piece of evidence read after `device_ack`), and no value is
    shown younger than its arrival."""
    require("asyncua")
    mixer = Mixer([sys.executable, str(MIXER), "--timestamps", timestamps], tmp_path / "mixer.log")
    try:
        plant = mixer.plant(tmp_path, f"asyncua, timestamps {timestamps}")
        async with serve(closedloop_bin, plant, request) as session:
            await online(session)
            for tool, args in [("mixer_set_setpoint", {"rpm": 300.0}), ("mixer_start", {"rpm": 640.0})]:
                sc = await act(session, tool, args, limit_s=30)
                assert outcome(sc) == ("completed", None), sc
                ack = next(e["at"] for e in sc["timeline"] if e["event"] == "device_ack")
                for name, reading in sc["evidence"].items():
                    assert reading["at"] >= ack, (name, reading, ack)
            state = await call(session, "get_device_state", {"device": "mixer"})
            now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            for name, s in state["signals"].items():
                assert s["age_ms"] >= 0 and s["at"] <= now, (name, s, now)
    finally:
        mixer.stop(request, "mixer_server.py")
