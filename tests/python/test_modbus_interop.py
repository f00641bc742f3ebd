"""Modbus interop with stacks no one here wrote (issue 5): pymodbus 3.16 on the other end.

1. A pymodbus TCP server (modbus/slide_server.py) stands in for a relay and a slide;
   `closedloop serve` drives it through the `modbus-tcp` driver to `completed`, and with injected
   exceptions to `failed BUS_NAK` (exception 4) and `failed REGISTER_INVALID` (2, 3).
2. A pymodbus client reads and writes `closedloop sim`'s registers.
3. Modbus RTU over a socat pty pair: the same script as a pymodbus serial server on one end,
   `closedloop serve` with the `modbus-rtu` driver on the other.
4. The safety envelope against the pymodbus TCP server: a relay with `max_rate` switched in a
   loop is `rejected RATE_LIMITED` with `retry_after_s`, and pymodbus saw no write from it.

A missing prerequisite (pymodbus, pyserial, socat) fails the test; nothing here skips.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import Lines, act, call, outcome, require, serve, stop

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SLIDE_SERVER = HERE / "modbus" / "slide_server.py"


# ---------------------------------------------------------------------------------------------
# Processes


class SlideServer:
    """modbus/slide_server.py as a child process, with its stdin control."""

    def __init__(self, args: list[str], log: Path) -> None:
        require("pymodbus")
        self.log = log
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(SLIDE_SERVER), *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                bufsize=1,
            )
        self.lines = Lines(self.proc, log)
        self.banner = self.lines.next(20, "slide_server.py announcing itself")

    def ctl(self, *words: Any) -> None:
        """Sends one control line and waits for its "ok"."""
        line = " ".join(str(w) for w in words)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.lines.next(5, f"slide_server.py answering {line!r}")
        assert answer == f"ok {line}", answer

    def writes(self, unit: int) -> int:
        """How many write requests `unit` accepted so far, by the server's own count."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"writes {unit}\n")
        self.proc.stdin.flush()
        answer = self.lines.next(5, f"slide_server.py counting the writes of unit {unit}")
        prefix = f"ok writes {unit} "
        assert answer.startswith(prefix), answer
        return int(answer[len(prefix):])

    def close(self) -> None:
        stop(self.proc)


@pytest.fixture
def tcp_slide_server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[SlideServer, str]]:
    """The pymodbus TCP server on a port the OS picks; yields it and its HOST:PORT."""
    server = SlideServer(["--tcp", "127.0.0.1:0"], tmp_path / "slide_server.log")
    try:
        prefix = "slide_server: listening on "
        assert server.banner.startswith(prefix), server.banner
        yield server, server.banner[len(prefix):]
    finally:
        server.close()
        request.node.add_report_section("teardown", "slide_server.py stderr", server.log.read_text()[-20000:])


def plant_toml(driver: str, *, slide: bool = True) -> str:
    """A plant whose relay is unit 1 and slide unit 2 behind `driver` (an inline TOML table body
    without the unit), with the signals and actions of examples/modbus-workshop.toml."""
    relay = f"""
[[device]]
id = "relay"
description = "Relay on a pymodbus server; its auxiliary contact follows the coil"
driver = {{ {driver}, unit = 1 }}
poll_ms = 20
[device.signals]
commanded = {{ coil = 0 }}
contact   = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch the relay."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.05
idempotent = true
"""
    slide_dev = f"""
[[device]]
id = "slide"
description = "Linear slide on a pymodbus server, travel 0-300 mm"
driver = {{ {driver}, unit = 2 }}
poll_ms = 20
[device.signals]
position_mm = {{ holding = 2, type = "i32", scale = 0.01, unit = "mm" }}
moving      = {{ discrete_input = 0 }}
fault       = {{ discrete_input = 1 }}
[[device.action]]
name = "move_to"
description = "Move the slide to an absolute position."
params = {{ target_mm = {{ type = "number", min = 0.0, max = 300.0, unit = "mm" }} }}
write = [{{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }}, {{ coil = 0, value = "true" }}]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"
fail_when = {{ MOTOR_STALL = "fault" }}
expect_s = "abs(params.target_mm - position_mm) / 100.0 + 0.05"
cancel = [{{ coil = 1, value = "true" }}]
stopped_when = "!moving"
idempotent = false
"""
    head = '[server]\nname = "pymodbus-interop"\njournal = "sqlite://interop.db"\n'
    return head + relay + (slide_dev if slide else "")


# ---------------------------------------------------------------------------------------------
# 1. closedloop drives a pymodbus TCP server


@pytest.fixture
def tcp_plant(tmp_path: Path, tcp_slide_server: tuple[SlideServer, str]) -> Path:
    _, addr = tcp_slide_server
    path = tmp_path / "plant.toml"
    path.write_text(plant_toml(f'kind = "modbus-tcp", address = "{addr}"'), encoding="utf-8")
    return path


async def test_pymodbus_tcp_relay_and_slide_complete(
    closedloop_bin: Path, tcp_plant: Path, request: pytest.FixtureRequest
) -> None:
    """The relay switches on and off and the slide moves, each `completed` with evidence read
    back from the pymodbus server after the write."""
    async with serve(closedloop_bin, tcp_plant, request) as session:
        for on in (True, False, True):
            sc = await act(session, "relay_switch", {"on": on})
            assert outcome(sc) == ("completed", None), sc
            assert sc["verified"] is True, sc
            assert sc["evidence"]["contact"]["value"] is on, sc

        for target in (150.0, 42.5):
            sc = await act(session, "slide_move_to", {"target_mm": target})
            assert outcome(sc) == ("completed", None), sc
            assert sc["verified"] is True, sc
            assert sc["evidence"]["position_mm"]["value"] == pytest.approx(target, abs=0.01), sc

        state = await call(session, "get_device_state", {"device": "slide"})
        position = state["signals"]["position_mm"]
        assert position["value"] == pytest.approx(42.5, abs=0.01), state
        assert position["unit"] == "mm" and position["source"] == "holding:2", state


@pytest.mark.parametrize(
    ("exception", "code"),
    [(4, "BUS_NAK"), (2, "REGISTER_INVALID"), (3, "REGISTER_INVALID")],
    ids=["exc4-device-failure", "exc2-illegal-address", "exc3-illegal-value"],
)
async def test_pymodbus_tcp_exceptions_fail_with_their_code(
    closedloop_bin: Path,
    tcp_plant: Path,
    tcp_slide_server: tuple[SlideServer, str],
    request: pytest.FixtureRequest,
    exception: int,
    code: str,
) -> None:
    """A write answered with a Modbus exception is `failed` with the contract's code, never
    `completed`; once the device accepts writes again the same action completes."""
    server, _ = tcp_slide_server
    async with serve(closedloop_bin, tcp_plant, request) as session:
        for unit, tool, args in ((1, "relay_switch", {"on": True}), (2, "slide_move_to", {"target_mm": 120.0})):
            server.ctl("fail", unit, exception)
            sc = await act(session, tool, args)
            assert outcome(sc) == ("failed", code), sc
            assert f"exception {exception}" in sc["detail"], sc
            assert sc.get("verified") is not True and not sc.get("evidence"), sc

            server.ctl("clear", unit)
            sc = await act(session, tool, args)
            assert outcome(sc) == ("completed", None), sc


# ---------------------------------------------------------------------------------------------
# 2. A pymodbus client reads `closedloop sim`


@pytest.fixture
def closedloop_sim(closedloop_bin: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, tuple[int, str]]]:
    """`closedloop sim` on a copy of examples/modbus-workshop.toml listening on a free port.
    Yields {device: (unit, HOST:PORT)} from the lines it announces on stdout."""
    example = (REPO / "examples" / "modbus-workshop.toml").read_text(encoding="utf-8")
    plant = tmp_path / "sim.toml"
    plant.write_text(example.replace('listen = "127.0.0.1:1502"', 'listen = "127.0.0.1:0"'), encoding="utf-8")
    log = tmp_path / "sim.log"
    with open(log, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [str(closedloop_bin), "sim", str(plant)], cwd=tmp_path,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
        )
    try:
        units: dict[str, tuple[int, str]] = {}
        lines = Lines(proc, log)
        while True:
            words = lines.next(30, "closedloop sim announcing its listeners").split()
            match words:
                case ["closedloop", "sim:", "control", "on", _]:
                    break
                case ["closedloop", "sim:", device, "unit", unit, "on", addr]:
                    units[device] = (int(unit), addr)
        yield units
    finally:
        stop(proc)
        request.node.add_report_section("teardown", "closedloop sim stderr", log.read_text()[-20000:])


async def test_pymodbus_client_reads_closedloop_sim(closedloop_sim: dict[str, tuple[int, str]]) -> None:
    """pymodbus writes the lamp's coil, sees its auxiliary contact pull in, and reads the oven's
    temperature register (250 = 25.0 °C at ambient)."""
    require("pymodbus")
    from pymodbus.client import AsyncModbusTcpClient

    assert {"lamp", "oven"} <= closedloop_sim.keys(), closedloop_sim
    lamp_unit, lamp_addr = closedloop_sim["lamp"]
    oven_unit, oven_addr = closedloop_sim["oven"]
    host, _, port = lamp_addr.rpartition(":")
    client = AsyncModbusTcpClient(host, port=int(port), timeout=3, retries=0)
    assert await client.connect(), f"pymodbus could not connect to closedloop sim at {lamp_addr}"
    try:
        rr = await client.read_discrete_inputs(0, count=1, device_id=lamp_unit)
        assert not rr.isError() and rr.bits[0] is False, rr

        wr = await client.write_coil(0, True, device_id=lamp_unit)
        assert not wr.isError() and wr.bits[0] is True, wr
        rc = await client.read_coils(0, count=1, device_id=lamp_unit)
        assert not rc.isError() and rc.bits[0] is True, rc

        with anyio.fail_after(3):  # the relay's pull-in time, then the contact closes
            while True:
                rr = await client.read_discrete_inputs(0, count=1, device_id=lamp_unit)
                assert not rr.isError(), rr
                if rr.bits[0]:
                    break
                await anyio.sleep(0.01)

        if oven_addr != lamp_addr:
            client.close()
            host, _, port = oven_addr.rpartition(":")
            client = AsyncModbusTcpClient(host, port=int(port), timeout=3, retries=0)
            assert await client.connect()
        ir = await client.read_input_registers(0, count=1, device_id=oven_unit)
        assert not ir.isError(), ir
        assert ir.registers == [250], ir  # 25.0 °C with scale 0.1

        # An address the relay does not have: closedloop sim answers a Modbus exception.
        bad = await client.read_holding_registers(40, count=1, device_id=lamp_unit)
        assert bad.isError() and bad.exception_code in (1, 2), bad
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------
# 3. Modbus RTU over a socat pty pair


@pytest.fixture
def pty_pair(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Path, Path]]:
    """Two linked ptys from socat: bytes written to one come out of the other."""
    socat = shutil.which("socat")
    if socat is None:
        pytest.fail(
            "socat is not installed: the Modbus RTU interop test needs it for a pty pair "
            "(`apt-get install socat`)",
            pytrace=False,
        )
    a, b = tmp_path / "a", tmp_path / "b"
    log = tmp_path / "socat.log"
    with open(log, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [socat, "-d", "-d", f"pty,raw,echo=0,link={a}", f"pty,raw,echo=0,link={b}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
        )
    try:
        deadline = time.monotonic() + 10
        while not (a.exists() and b.exists() and "starting data transfer loop" in log.read_text()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"socat made no pty pair (exit code {proc.returncode}):\n{log.read_text()}", pytrace=False)
            time.sleep(0.02)
        yield a, b
    finally:
        stop(proc)
        request.node.add_report_section("teardown", "socat stderr", log.read_text()[-5000:])


async def test_modbus_rtu_over_socat_against_pymodbus_serial_server(
    closedloop_bin: Path, tmp_path: Path, pty_pair: tuple[Path, Path], request: pytest.FixtureRequest
) -> None:
    """pymodbus's RTU serial server on one pty, closedloop's `modbus-rtu` driver on the other:
    the relay and the slide complete across RTU frames (CRCs from two different stacks)."""
    require("serial")
    a, b = pty_pair
    server = SlideServer(["--serial", str(a), "--baud", "19200"], tmp_path / "slide_server.log")
    try:
        assert server.banner == f"slide_server: serving {a}", server.banner
        plant = tmp_path / "plant.toml"
        plant.write_text(
            plant_toml(f'kind = "modbus-rtu", port = "{b}", baud = 19200, parity = "N"'), encoding="utf-8"
        )
        async with serve(closedloop_bin, plant, request) as session:
            for on in (True, False):
                sc = await act(session, "relay_switch", {"on": on})
                assert outcome(sc) == ("completed", None), sc
                assert sc["evidence"]["contact"]["value"] is on, sc
            sc = await act(session, "slide_move_to", {"target_mm": 75.25})
            assert outcome(sc) == ("completed", None), sc
            assert sc["evidence"]["position_mm"]["value"] == pytest.approx(75.25, abs=0.01), sc

            server.ctl("fail", 1, 4)
            sc = await act(session, "relay_switch", {"on": True})
            assert outcome(sc) == ("failed", "BUS_NAK"), sc
            assert "exception 4" in sc["detail"], sc
    finally:
        server.close()
        request.node.add_report_section("teardown", "slide_server.py stderr", server.log.read_text()[-20000:])


# ---------------------------------------------------------------------------------------------
# 4. The safety envelope against a foreign peer


async def test_a_rate_limited_switch_is_refused_and_pymodbus_receives_no_write(
    closedloop_bin: Path,
    tmp_path: Path,
    tcp_slide_server: tuple[SlideServer, str],
    request: pytest.FixtureRequest,
) -> None:
    """`max_rate = "2/min"` on the relay: two switches complete; the third, in the same minute,
    is `rejected RATE_LIMITED` with `retry_after_s`, and pymodbus's own write count and coil 0
    show that nothing of it reached the device."""
    require("pymodbus")
    from pymodbus.client import AsyncModbusTcpClient

    server, addr = tcp_slide_server
    path = tmp_path / "plant.toml"
    text = plant_toml(f'kind = "modbus-tcp", address = "{addr}"', slide=False)
    path.write_text(text.replace("idempotent = true", 'idempotent = true\nmax_rate = "2/min"'), encoding="utf-8")
    async with serve(closedloop_bin, path, request) as session:
        for on in (True, False):
            sc = await act(session, "relay_switch", {"on": on})
            assert outcome(sc) == ("completed", None), sc
        writes = server.writes(1)
        assert writes >= 2, writes

        sc = await call(session, "relay_switch", {"on": True, "wait_s": 5})
        assert outcome(sc) == ("rejected", "RATE_LIMITED"), sc
        assert 0 < sc["retry_after_s"] <= 60, sc
        assert "2/min" in sc["detail"], sc

        assert server.writes(1) == writes, "pymodbus received a write from the refused call"
        host, _, port = addr.rpartition(":")
        client = AsyncModbusTcpClient(host, port=int(port), timeout=3, retries=0)
        assert await client.connect(), f"pymodbus could not connect to {addr}"
        try:
            rc = await client.read_coils(0, count=1, device_id=1)
            assert not rc.isError() and rc.bits[0] is False, rc  # still off: "on" was never written
        finally:
            client.close()
