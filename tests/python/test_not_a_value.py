"""What is not a value is never a value (issue 52), against a firmware no one here wrote the stack
of: mqtt/ha_switch.py, a heater switch and an oven probe publishing as Home Assistant-shaped
firmwares do (`ON`/`OFF`, `None` for unknown, JSON with `null`, `nan`), through Mosquitto.

Each test checks closedloop's answer against the firmware's relay as it physically is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from support import Lines, act, call, outcome, require, serve, stop
from test_mqtt_esp32 import broker  # noqa: F401  (a fixture)

pytestmark = pytest.mark.anyio

SWITCH = Path(__file__).resolve().parent / "mqtt" / "ha_switch.py"


class Firmware:
    """mqtt/ha_switch.py as a child process, with its stdin control."""

    def __init__(self, host: str, port: int, prefix: str, log: Path) -> None:
        require("paho.mqtt.client")
        self.log = log
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(SWITCH), "--host", host, "--port", str(port), "--prefix", prefix],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
            )
        self.lines = Lines(self.proc, log)
        assert self.lines.next(20, "ha_switch.py connecting") == "ha_switch: connected"

    def ctl(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.lines.next(5, f"ha_switch.py answering {line!r}")
        assert answer.startswith("ok "), answer
        return answer

    def relay(self) -> str:
        """The relay as it physically is: `on` or `off`."""
        return self.ctl("relay?").removeprefix("ok relay? ")


def plant_text(host: str, port: int, prefix: str) -> str:
    return f"""
[server]
name = "not-a-value"
journal = "sqlite://nav.db"

[[device]]
id = "heater"
description = "oven heater behind a Home Assistant-shaped switch"
driver = {{ kind = "mqtt", broker = "mqtt://{host}:{port}", client_id = "closedloop-{uuid.uuid4().hex[:12]}" }}
poll_ms = 50
liveness = {{ max_silence_s = 30 }}
[device.signals]
heater = {{ topic = "{prefix}/heater/state", true_values = ["ON"], false_values = ["OFF"] }}
fault = {{ topic = "{prefix}/heater/fault", type = "bool" }}

[[device.action]]
name = "switch"
description = "Switch the heater."
params = {{ on = {{ type = "bool" }} }}
write = [{{ topic = "{prefix}/heater/set", payload = '${{params.on ? "ON" : "OFF"}}' }}]
done_when = "heater == params.on"
expect_s = 0.1
timeout_floor_ms = 1500
idempotent = true

[[device.action]]
name = "switch_watched"
description = "Switch the heater, failing on its fault flag."
params = {{ on = {{ type = "bool" }} }}
write = [{{ topic = "{prefix}/heater/set", payload = '${{params.on ? "ON" : "OFF"}}' }}]
done_when = "heater == params.on"
fail_when = {{ HEATER_FAULT = "fault" }}
expect_s = 0.1
timeout_floor_ms = 1500
idempotent = true

[[device.action]]
name = "pulse_nobody"
description = "Publish to a topic nobody subscribes to."
write = [{{ topic = "{prefix}/nobody/listens", payload = "GO" }}]
verification = "none"

[[device]]
id = "probe"
description = "oven probe"
driver = {{ kind = "mqtt", broker = "mqtt://{host}:{port}", client_id = "closedloop-{uuid.uuid4().hex[:12]}" }}
poll_ms = 50
liveness = {{ max_silence_s = 30 }}
[device.signals]
temp_c = {{ topic = "{prefix}/probe", json = "/temperature", time_json = "/time", unit = "°C" }}

[[device]]
id = "ghost"
description = "a board that never reports (a plant from init: an hour's silence window)"
driver = {{ kind = "mqtt", broker = "mqtt://{host}:{port}", client_id = "closedloop-{uuid.uuid4().hex[:12]}" }}
liveness = {{ max_silence_s = 3600 }}
[device.signals]
relay = {{ topic = "{prefix}/ghost/state", type = "bool" }}

[[device.action]]
name = "switch"
description = "Switch the ghost."
params = {{ on = {{ type = "bool" }} }}
write = [{{ topic = "{prefix}/ghost/set", payload = '${{params.on}}' }}]
done_when = "relay == params.on"

[[alarm]]
name = "OVEN_HOT"
when = "devices.probe.temp_c > 60"
blocks = ["heater"]
description = "The oven is too hot to heat."
"""


@pytest.fixture
def rig(tmp_path: Path, broker: tuple[str, int], request: pytest.FixtureRequest) -> Iterator[tuple[Firmware, Path]]:  # noqa: F811
    host, port = broker
    prefix = f"closedloop-test/{uuid.uuid4().hex[:12]}"
    fw = Firmware(host, port, prefix, tmp_path / "ha_switch.log")
    text = plant_text(host, port, prefix)
    # One broker, one connection: every device on it gives the same client id.
    client_id = text.split('client_id = "', 1)[1].split('"', 1)[0]
    text = re.sub(r'client_id = "closedloop-[0-9a-f]+"', f'client_id = "{client_id}"', text)
    plant = tmp_path / "plant.toml"
    plant.write_text(text, encoding="utf-8")
    try:
        yield fw, plant
    finally:
        stop(fw.proc)
        request.node.add_report_section("teardown", "ha_switch.py stderr", fw.log.read_text()[-20000:])


async def heard(session, device: str, signal: str) -> dict:
    """get_device_state once `signal` of `device` has a value (bounded)."""
    with anyio.fail_after(10):
        while True:
            state = await call(session, "get_device_state", {"device": device})
            if state["liveness"] == "online" and signal in state["signals"]:
                return state
            await anyio.sleep(0.05)


async def ready(session, fw: Firmware) -> None:
    """The heater heard (OFF) and the probe cool, so OVEN_HOT is clear (bounded)."""
    fw.ctl("say OFF")
    fw.ctl('probe {"temperature": 20.0}')
    await heard(session, "heater", "heater")
    with anyio.fail_after(10):
        while (await call(session, "list_alarms", {}))["alarms"][0]["active"]:
            await anyio.sleep(0.05)


async def test_a_state_topic_saying_none_never_confirms_off_while_the_relay_stays_on(
    closedloop_bin: Path, rig: tuple[Firmware, Path], request: pytest.FixtureRequest
) -> None:
    fw, plant = rig
    async with serve(closedloop_bin, plant, request) as session:
        await ready(session, fw)
        sc = await act(session, "heater_switch", {"on": True})
        assert outcome(sc) == ("completed", None) and fw.relay() == "on", sc
        for instead in ("None", "-"):  # Home Assistant's unknown; an empty payload
            fw.ctl(f"ignore {instead}")
            sc = await act(session, "heater_switch", {"on": False})
            assert fw.relay() == "on"
            assert outcome(sc) == ("failed", "NO_FEEDBACK"), sc
            assert sc["verified"] is False, sc
            assert "has had no value" in sc["detail"], sc
            assert ('"None"' if instead == "None" else "an empty payload") in sc["detail"], sc
            state = await call(session, "get_device_state", {"device": "heater"})
            assert "heater" in state["unreadable"], state
        fw.ctl("obey")
        sc = await act(session, "heater_switch", {"on": False})
        assert outcome(sc) == ("completed", None) and fw.relay() == "off", sc


async def test_nan_and_null_from_a_probe_raise_the_alarm_and_refuse_the_heater(
    closedloop_bin: Path, rig: tuple[Firmware, Path], request: pytest.FixtureRequest
) -> None:
    fw, plant = rig
    async with serve(closedloop_bin, plant, request) as session:
        fw.ctl("say OFF")
        fw.ctl('probe {"temperature": 45.0}')
        await heard(session, "heater", "heater")
        await heard(session, "probe", "temp_c")
        with anyio.fail_after(10):
            while (await call(session, "list_alarms", {}))["alarms"][0]["active"]:
                await anyio.sleep(0.05)
        for body in ("nan", '{"temperature": null}', '{"temperature": "nan"}', "", "{}"):
            fw.ctl(f"probe {body}" if body else "probe -")
            with anyio.fail_after(10):
                while "temp_c" not in (await call(session, "get_device_state", {"device": "probe"})).get("unreadable", {}):
                    await anyio.sleep(0.05)
            alarm = (await call(session, "list_alarms", {}))["alarms"][0]
            with anyio.fail_after(10):
                while not alarm["active"]:
                    await anyio.sleep(0.05)
                    alarm = (await call(session, "list_alarms", {}))["alarms"][0]
            assert "temp_c" in alarm.get("why", ""), alarm
            sc = await act(session, "heater_switch", {"on": True})
            assert outcome(sc) == ("rejected", "INTERLOCK"), (body, sc)
            assert fw.relay() == "off"
            fw.ctl('probe {"temperature": 45.0}')
            with anyio.fail_after(10):
                while (await call(session, "list_alarms", {}))["alarms"][0]["active"]:
                    await anyio.sleep(0.05)


async def test_a_retained_state_is_no_baseline_for_already_so(
    closedloop_bin: Path, rig: tuple[Firmware, Path], request: pytest.FixtureRequest
) -> None:
    fw, plant = rig
    fw.ctl("retain ON")  # the broker remembers ON; the relay is off
    assert fw.relay() == "off"
    async with serve(closedloop_bin, plant, request) as session:
        with anyio.fail_after(10):
            while "heater" not in (state := await call(session, "get_device_state", {"device": "heater"}))["signals"]:
                await anyio.sleep(0.05)
        shown = state["signals"]["heater"]
        assert shown["retained"] is True and shown["age_ms"] is None and shown["at"] is None, shown
        assert state["liveness"] == "unknown", state  # a retained message is no sign of life
        fw.ctl("fault false")  # a live message: the board is heard
        fw.ctl('probe {"temperature": 20.0}')
        with anyio.fail_after(10):
            while (await call(session, "list_alarms", {}))["alarms"][0]["active"]:
                await anyio.sleep(0.05)
        sc = await act(session, "heater_switch", {"on": True})
        assert fw.relay() == "on"
        assert outcome(sc) == ("completed", None), sc
        assert "already" not in sc, sc
    fw.ctl("retain -")


def iso(unix_s: float) -> str:
    """An RFC 3339 time with its zone, as a firmware with NTP writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix_s)) + f".{int(unix_s * 1000) % 1000:03d}+00:00"


async def test_a_retained_value_whose_payload_carries_its_time_is_shown_as_old_as_that(
    closedloop_bin: Path, rig: tuple[Firmware, Path], request: pytest.FixtureRequest
) -> None:
    fw, plant = rig
    taken = time.time() - 21.7
    fw.ctl(f'probe-retain {{"temperature": 20.0, "time": "{iso(taken)}"}}')
    try:
        async with serve(closedloop_bin, plant, request) as session:
            with anyio.fail_after(10):
                while "temp_c" not in (state := await call(session, "get_device_state", {"device": "probe"}))["signals"]:
                    await anyio.sleep(0.05)
            shown = state["signals"]["temp_c"]
            # As old as its payload says (never the 0.x s since the broker handed it over).
            assert shown["retained"] is True and shown["value"] == 20.0, shown
            assert 21_700 <= shown["age_ms"] < 21_700 + 15_000, shown
            assert shown["at"] == iso(taken).replace("+00:00", "Z"), shown
            # Still never decided on: the alarm that reads it fails safe.
            alarm = (await call(session, "list_alarms", {}))["alarms"][0]
            assert alarm["active"] is True, alarm
            # A live value is as old as it says it is; one dated in the future (a clock ahead
            # of ours), or not dated at all, counts from its arrival; a time without a zone dates nothing.
            for body, least, most in (
                (f'{{"temperature": 21.0, "time": "{iso(time.time() - 5)}"}}', 5_000, 15_000),
                (f'{{"temperature": 22.0, "time": "{iso(time.time() + 60)}"}}', 0, 5_000),
                ('{"temperature": 23.0, "time": "2026-12-07T17:00:00"}', 0, 5_000),
                (f'{{"temperature": 24.0, "time": {int((time.time() - 9) * 1000)}}}', 9_000, 19_000),
            ):
                value = json.loads(body)["temperature"]
                fw.ctl(f"probe {body}")
                with anyio.fail_after(10):
                    while (shown := (await call(session, "get_device_state", {"device": "probe"}))["signals"]["temp_c"])["value"] != value:
                        await anyio.sleep(0.05)
                assert not shown.get("retained"), shown
                assert least <= shown["age_ms"] < most, (body, shown)
            with anyio.fail_after(10):
                while (await call(session, "list_alarms", {}))["alarms"][0]["active"]:
                    await anyio.sleep(0.05)
    finally:
        fw.ctl("probe-retain -")


async def test_a_fault_flag_sent_only_on_change_stands_while_the_device_is_online(
    closedloop_bin: Path, rig: tuple[Firmware, Path], request: pytest.FixtureRequest
) -> None:
    fw, plant = rig
    async with serve(closedloop_bin, plant, request) as session:
        await ready(session, fw)
        fw.ctl("fault false")
        await heard(session, "heater", "fault")
        sc = await act(session, "heater_switch_watched", {"on": True})
        assert fw.relay() == "on"
        assert outcome(sc) == ("completed", None), sc
        fw.ctl("fault true")
        with anyio.fail_after(10):
            while not (await call(session, "get_device_state", {"device": "heater"}))["signals"]["fault"]["value"]:
                await anyio.sleep(0.05)
        sc = await act(session, "heater_switch_watched", {"on": False})
        assert outcome(sc) == ("rejected", "INTERLOCK"), sc


async def test_no_matching_subscribers_is_not_delivered(
    closedloop_bin: Path, rig: tuple[Firmware, Path], request: pytest.FixtureRequest
) -> None:
    fw, plant = rig
    async with serve(closedloop_bin, plant, request) as session:
        await ready(session, fw)
        sc = await act(session, "heater_pulse_nobody", {})
        assert outcome(sc) == ("failed", "DEVICE_OFFLINE"), sc
        assert "No matching subscribers" in sc["detail"], sc


async def test_a_device_never_heard_answers_within_the_calls_wait(
    closedloop_bin: Path, rig: tuple[Firmware, Path], request: pytest.FixtureRequest
) -> None:
    _, plant = rig
    async with serve(closedloop_bin, plant, request) as session:
        started = time.monotonic()
        sc = await call(session, "ghost_switch", {"on": True, "wait_s": 1})
        took = time.monotonic() - started
        assert outcome(sc) == ("rejected", "DEVICE_OFFLINE"), sc
        assert "never been heard since the gateway started" in sc["detail"], sc
        # A figure, not a timing assertion: the call answered instead of holding the client.
        print(f"a call on a device never heard answered in {took:.2f} s (wait_s 1)")
