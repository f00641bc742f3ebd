"""The mixer of issue 10 on a foreign OPC UA server, driven through `closedloop serve`; shared by
test_opcua_asyncua.py (opcua/mixer_server.py) and test_opcua_nodeopcua.py
(opcua/node/mixer_server.cjs).

`Start(rpm)` sets `Setpoint` and `Running = true` inside the call, and the server ramps `Speed`
towards the setpoint at 200 rpm/s. `Running` is stamped before the call's answer, so a
subscription never sends it again: only reads issued after the acknowledgement can confirm it.
The same holds for a node write of `Setpoint` judged on `Setpoint` itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from support import Lines, act, call, outcome, serve, stop

PLANT = """
[server]
name = "opcua-mixer"
journal = "sqlite://mixer.db"

[[device]]
id = "mixer"
description = "Mixer on an OPC UA server ({stack})"
driver = {{ kind = "opcua", endpoint = "{endpoint}", security = "none" }}
poll_ms = 50
liveness = {{ max_silence_s = 2.0 }}
[device.signals]
speed_rpm = {{ node = "ns=2;s=Mixer.Speed", unit = "rpm" }}
running   = {{ node = "ns=2;s=Mixer.Running", type = "bool" }}
setpoint  = {{ node = "ns=2;s=Mixer.Setpoint", unit = "rpm" }}
[[device.action]]
name = "start"
description = "Start the mixer at a speed; it ramps at 200 rpm/s."
params = {{ rpm = {{ type = "number", min = 0.0, max = 3000.0, unit = "rpm" }} }}
write = [{{ method = "ns=2;s=Mixer.Start", object = "ns=2;s=Mixer", args = ["params.rpm"] }}]
done_when = "abs(speed_rpm - params.rpm) <= 5.0 && running"
expect_s = 3.5
[[device.action]]
name = "set_setpoint"
description = "Write the mixer's setpoint."
params = {{ rpm = {{ type = "number", min = 0.0, max = 3000.0, unit = "rpm" }} }}
write = [{{ node = "ns=2;s=Mixer.Setpoint", value = "params.rpm" }}]
done_when = "abs(setpoint - params.rpm) <= 0.5"
expect_s = 0.3
"""


class Mixer:
    """A mixer server as a child process: `argv` prints its endpoint as its first stdout line."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1, env=env,
            )
        self.endpoint = Lines(self.proc, log).next(60, f"{Path(argv[1]).name} announcing its endpoint")
        assert self.endpoint.startswith("opc.tcp://127.0.0.1:"), self.endpoint

    def plant(self, into: Path, stack: str) -> Path:
        path = into / "plant.toml"
        path.write_text(PLANT.format(endpoint=self.endpoint, stack=stack), encoding="utf-8")
        return path

    def stop(self, request: pytest.FixtureRequest, what: str) -> None:
        stop(self.proc)
        request.node.add_report_section("teardown", f"{what} stderr", self.log.read_text()[-20000:])


async def online(session: ClientSession) -> None:
    with anyio.fail_after(20):
        while (await call(session, "get_device_state", {"device": "mixer"}))["liveness"] != "online":
            await anyio.sleep(0.1)


def signal_after_ack(sc: dict[str, Any]) -> None:
    """The timeline has a `signal` entry after `device_ack` (the reading that confirmed it)."""
    events = [e["event"] for e in sc["timeline"]]
    assert "device_ack" in events, sc
    assert "signal" in events[events.index("device_ack") + 1 :], events


async def start_completes(closedloop_bin: Path, plant: Path, request: pytest.FixtureRequest) -> None:
    """Start(640): Running was set inside the call, Speed ramps for 3.2 s; reads after the ack
    confirm both."""
    async with serve(closedloop_bin, plant, request) as session:
        await online(session)
        sc = await act(session, "mixer_start", {"rpm": 640.0}, limit_s=30)
        assert outcome(sc) == ("completed", None), sc
        assert sc["verified"] is True, sc
        evidence = sc["evidence"]
        assert abs(evidence["speed_rpm"]["value"] - 640.0) <= 5.0, evidence
        assert evidence["running"]["value"] is True, evidence
        assert evidence["running"]["source"] == "ns=2;s=Mixer.Running", evidence
        signal_after_ack(sc)


async def setpoint_write_completes(closedloop_bin: Path, plant: Path, request: pytest.FixtureRequest) -> None:
    """A write of Setpoint judged on Setpoint itself: the write's own value is stamped before its
    acknowledgement, so only a read after it confirms it."""
    async with serve(closedloop_bin, plant, request) as session:
        await online(session)
        sc = await act(session, "mixer_set_setpoint", {"rpm": 300.0})
        assert outcome(sc) == ("completed", None), sc
        # Judged on the node it writes: a readback, never feedback (issue 56), said so.
        assert (sc["verified"], sc["verification"], sc["readback_matched"]) == (False, "readback", True), sc
        assert abs(sc["evidence"]["setpoint"]["value"] - 300.0) <= 0.5, sc
        assert sc["evidence"]["setpoint"]["source"] == "ns=2;s=Mixer.Setpoint", sc
        signal_after_ack(sc)
