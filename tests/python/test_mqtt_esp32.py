"""MQTT interop with a stack no one here wrote (issue 5): an ESP32-style firmware in paho-mqtt
(mqtt/esp32_lamp.py: JSON state, commands on a topic, a retained status with a last will) driven
by `closedloop serve` through Mosquitto.

The broker is $CLOSEDLOOP_MQTT_URL when set (`.ci/run` sets the machine's Mosquitto), else a
Mosquitto this test starts on a free port. Every test uses its own topic prefix and client ids,
so a shared broker is safe. A missing prerequisite fails the test; nothing here skips.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import anyio
import pytest
from support import Lines, act, call, outcome, require, serve, stop

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
LAMP = HERE / "mqtt" / "esp32_lamp.py"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """(host, port) of the broker to use."""
    url = os.environ.get("CLOSEDLOOP_MQTT_URL")
    if url:
        u = urlparse(url)
        host, port = u.hostname or "127.0.0.1", u.port or 1883
        try:
            socket.create_connection((host, port), timeout=3).close()
        except OSError as exc:
            pytest.fail(f"CLOSEDLOOP_MQTT_URL={url} is not reachable: {exc}", pytrace=False)
        yield host, port
        return
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.access(mosquitto, os.X_OK):
        pytest.fail("mosquitto is missing: run `bash scripts/system-deps`", pytrace=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    proc = subprocess.Popen([mosquitto, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("mosquitto did not start listening within 10 s", pytrace=False)
                time.sleep(0.02)
        yield "127.0.0.1", port
    finally:
        stop(proc)


class Esp32:
    """mqtt/esp32_lamp.py as a child process, with its stdin control."""

    def __init__(self, host: str, port: int, prefix: str, log: Path, period_s: float = 0.3) -> None:
        require("paho.mqtt.client")
        self.log = log
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(LAMP), "--host", host, "--port", str(port), "--prefix", prefix,
                 "--period", str(period_s)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
            )
        self.lines = Lines(self.proc, log)
        banner = self.lines.next(20, "esp32_lamp.py connecting")
        assert banner == "esp32_lamp: connected", banner

    def ctl(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        assert self.lines.next(5, f"esp32_lamp.py answering {word!r}") == f"ok {word}"

    def lamp(self) -> str:
        """The lamp as it physically is: `on` or `off`."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("lamp?\n")
        self.proc.stdin.flush()
        answer = self.lines.next(5, "esp32_lamp.py answering 'lamp?'")
        assert answer.startswith("ok lamp? "), answer
        return answer.removeprefix("ok lamp? ")

    def power_cut(self) -> None:
        """SIGKILL: the TCP connection drops without DISCONNECT, so the broker sends the will."""
        self.proc.kill()
        self.proc.wait()


def lamp_plant(path: Path, host: str, port: int, prefix: str, *, max_silence_s: float, poll_ms: int,
               actions: dict[str, float]) -> Path:
    """A plant for the firmware on `prefix`: its `power` and `uptime_s`, and one switch action per
    entry of `actions` (name: expect_s)."""
    switches = "".join(
        f"""
[[device.action]]
name = "{name}"
description = "Switch the lamp."
params = {{ on = {{ type = "bool" }} }}
write = [{{ topic = "{prefix}/cmd", payload = '{{"state": "${{params.on ? "ON" : "OFF"}}", "id": "${{command_id}}"}}' }}]
done_when = "power == params.on"
expect_s = {expect_s}
idempotent = true
"""
        for name, expect_s in actions.items()
    )
    path.write_text(
        f"""
[server]
name = "esp32-interop"
journal = "sqlite://esp32.db"

[[device]]
id = "lamp"
description = "ESP32 lamp running paho-mqtt firmware"
driver = {{ kind = "mqtt", broker = "mqtt://{host}:{port}", client_id = "closedloop-{uuid.uuid4().hex[:12]}" }}
poll_ms = {poll_ms}
liveness = {{ status_topic = "{prefix}/status", max_silence_s = {max_silence_s} }}
[device.signals]
power    = {{ topic = "{prefix}/tele", json = "/POWER", true_values = ["ON"], false_values = ["OFF"] }}
uptime_s = {{ topic = "{prefix}/tele", json = "/uptime_s", unit = "s" }}
"""
        + switches,
        encoding="utf-8",
    )
    return path


@pytest.fixture
def lamp(tmp_path: Path, broker: tuple[str, int], request: pytest.FixtureRequest) -> Iterator[tuple[Esp32, Path]]:
    """The firmware on a fresh prefix, and a plant for it."""
    host, port = broker
    prefix = f"closedloop-test/{uuid.uuid4().hex[:12]}/lamp"
    device = Esp32(host, port, prefix, tmp_path / "esp32.log")
    plant = lamp_plant(tmp_path / "plant.toml", host, port, prefix, max_silence_s=1.5, poll_ms=50,
                       actions={"switch": 0.1})
    try:
        yield device, plant
    finally:
        stop(device.proc)
        request.node.add_report_section("teardown", "esp32_lamp.py stderr", device.log.read_text()[-20000:])


async def online(session) -> dict:
    """get_device_state once the lamp has been heard from (bounded)."""
    with anyio.fail_after(10):
        while True:
            state = await call(session, "get_device_state", {"device": "lamp"})
            if state["liveness"] == "online" and "power" in state["signals"]:
                return state
            await anyio.sleep(0.05)


async def test_the_esp32_lamp_switches_completed_with_evidence(
    closedloop_bin: Path, lamp: tuple[Esp32, Path], request: pytest.FixtureRequest
) -> None:
    _, plant = lamp
    async with serve(closedloop_bin, plant, request) as session:
        state = await online(session)
        assert state["signals"]["uptime_s"]["unit"] == "s", state
        for on in (True, False, True):
            sc = await act(session, "lamp_switch", {"on": on})
            assert outcome(sc) == ("completed", None), sc
            assert sc["verified"] is True, sc
            assert sc["evidence"]["power"]["value"] is on, sc
            assert sc["evidence"]["power"]["source"].endswith("/tele /POWER"), sc


async def test_a_relay_that_does_not_follow_fails_feedback_mismatch(
    closedloop_bin: Path, lamp: tuple[Esp32, Path], request: pytest.FixtureRequest
) -> None:
    device, plant = lamp
    async with serve(closedloop_bin, plant, request) as session:
        await online(session)
        device.ctl("stuck")
        sc = await act(session, "lamp_switch", {"on": True})
        assert outcome(sc) == ("failed", "FEEDBACK_MISMATCH"), sc
        # The broker's PUBACK put it in `running`; it never went further.
        events = [e["event"] for e in sc["timeline"]]
        assert "device_ack" in events and "completed" not in events, sc


async def test_an_early_report_of_a_lamp_already_on_never_confirms_it(
    closedloop_bin: Path, lamp: tuple[Esp32, Path], request: pytest.FixtureRequest
) -> None:
    # The lamp hangs on the relay's normally-closed contact, so it is lit at rest and "ON" puts it
    # out; the firmware echoes the lamp ("ON") the moment the command arrives, 30 ms before the
    # relay moves. That echo comes after the broker's PUBACK but before expect_s (0.1 s): it may
    # not confirm "already so". The reports after it say "OFF", and so does the lamp.
    device, plant = lamp
    device.ctl("nc")
    device.ctl("receipt")
    async with serve(closedloop_bin, plant, request) as session:
        with anyio.fail_after(10):
            while (await online(session))["signals"]["power"]["value"] is not True:
                await anyio.sleep(0.05)
        sc = await act(session, "lamp_switch", {"on": True})
        assert outcome(sc) == ("timeout", "TIMEOUT"), sc
        assert sc["verified"] is False, sc
        assert device.lamp() == "off"
        signals = [e for e in sc["timeline"] if e["event"] == "signal"]
        assert any(e["values"]["power"] is False for e in signals), sc


async def test_a_frozen_firmware_is_offline_after_the_silence_window(
    closedloop_bin: Path, lamp: tuple[Esp32, Path], request: pytest.FixtureRequest
) -> None:
    device, plant = lamp
    async with serve(closedloop_bin, plant, request) as session:
        await online(session)
        device.ctl("freeze")
        with anyio.fail_after(10):
            while (await call(session, "get_device_state", {"device": "lamp"}))["liveness"] != "offline":
                await anyio.sleep(0.1)
        sc = await act(session, "lamp_switch", {"on": True})
        assert outcome(sc) == ("rejected", "DEVICE_OFFLINE"), sc


async def test_a_power_cut_fires_the_last_will_and_the_lamp_is_offline(
    closedloop_bin: Path, lamp: tuple[Esp32, Path], request: pytest.FixtureRequest
) -> None:
    device, plant = lamp
    async with serve(closedloop_bin, plant, request) as session:
        await online(session)
        device.power_cut()
        with anyio.fail_after(15):  # keep-alive 5 s × 1.5 at most before the broker notices
            while (await call(session, "get_device_state", {"device": "lamp"}))["liveness"] != "offline":
                await anyio.sleep(0.1)
        sc = await act(session, "lamp_switch", {"on": False})
        assert outcome(sc) == ("rejected", "DEVICE_OFFLINE"), sc
        assert "announced" in sc["detail"], sc  # the will, not the silence window


@pytest.fixture
def slow_lamp(tmp_path: Path, broker: tuple[str, int], request: pytest.FixtureRequest) -> Iterator[tuple[Esp32, Path]]:
    """The firmware with a heartbeat every 2 s (online within its 3 s window), and a plant whose
    `switch` has a 0.8 s deadline (expect_s 0.2) and whose `switch_patient` has one of 3.2 s."""
    host, port = broker
    prefix = f"closedloop-test/{uuid.uuid4().hex[:12]}/lamp"
    device = Esp32(host, port, prefix, tmp_path / "esp32.log", period_s=2.0)
    plant = lamp_plant(tmp_path / "plant.toml", host, port, prefix, max_silence_s=3.0, poll_ms=100,
                       actions={"switch": 0.2, "switch_patient": 1.0})
    try:
        yield device, plant
    finally:
        stop(device.proc)
        request.node.add_report_section("teardown", "esp32_lamp.py stderr", device.log.read_text()[-20000:])


async def just_after_a_heartbeat(session) -> None:
    """Returns as soon as a new heartbeat (its uptime) shows in the device state (bounded)."""
    before = (await online(session))["signals"]["uptime_s"]["value"]
    with anyio.fail_after(10):
        while (await call(session, "get_device_state", {"device": "lamp"}))["signals"]["uptime_s"]["value"] == before:
            await anyio.sleep(0.02)


async def test_an_online_board_that_ignores_a_command_is_no_feedback_not_offline(
    closedloop_bin: Path, slow_lamp: tuple[Esp32, Path], request: pytest.FixtureRequest
) -> None:
    device, plant = slow_lamp
    async with serve(closedloop_bin, plant, request) as session:
        device.ctl("deaf")
        # Right after a heartbeat: the next comes 2 s later, after the 0.8 s deadline.
        await just_after_a_heartbeat(session)
        sc = await act(session, "lamp_switch", {"on": True})
        state = await call(session, "get_device_state", {"device": "lamp"})
        assert outcome(sc) == ("failed", "NO_FEEDBACK"), sc
        assert sc["verified"] is False, sc
        assert state["liveness"] == "online", state
        assert "is online but reported nothing" in sc["detail"], sc
        assert "check its power and network" not in sc["hint"], sc
        assert device.lamp() == "off"


async def test_a_board_already_off_that_ignores_switch_off_completes_saying_it_was_already_so(
    closedloop_bin: Path, slow_lamp: tuple[Esp32, Path], request: pytest.FixtureRequest
) -> None:
    device, plant = slow_lamp
    async with serve(closedloop_bin, plant, request) as session:
        await online(session)
        assert device.lamp() == "off"
        device.ctl("deaf")
        sc = await act(session, "lamp_switch_patient", {"on": False})
        assert outcome(sc) == ("completed", None), sc
        assert sc.get("already") is True, sc
        result = await session.call_tool("get_command_status", {"command_id": sc["command_id"], "wait_s": 0})
        text = result.content[0].text
        assert text.startswith("Completed, but the device was already in that state"), text
        assert "Nothing shows it acted" in text, text
        assert "confirmed by the device's feedback" not in text, text
        assert device.lamp() == "off"
        # Not deaf: a switch it carries out is an ordinary completion.
        device.ctl("thaw")
        sc = await act(session, "lamp_switch_patient", {"on": True})
        assert outcome(sc) == ("completed", None) and "already" not in sc, sc
        assert device.lamp() == "on"
