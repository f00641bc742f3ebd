"""`closedloop init --mqtt` held to devices shaped as ESPHome, Tasmota and Zigbee2MQTT announce
themselves (mqtt/ha_device.py, paho-mqtt): their Home Assistant discovery messages become a plant
that `closedloop serve` uses to switch each relay — checked against the relay each device really
holds — and a board whose power is cut is refused DEVICE_OFFLINE.

The broker is $CLOSEDLOOP_MQTT_URL when set, else a Mosquitto of the test's own (the `broker`
fixture of test_mqtt_esp32.py). Every run uses its own discovery prefix and device names, and
clears its retained configs at the end. A missing prerequisite fails the test; nothing skips.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from support import Lines, act, call, outcome, require, serve, stop
from test_mqtt_esp32 import broker  # noqa: F401  (the fixture)

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
DEVICE = HERE / "mqtt" / "ha_device.py"


class HaDevice:
    """mqtt/ha_device.py as a child process, with its stdin control."""

    def __init__(self, kind: str, name: str, prefix: str, broker: tuple[str, int], log: Path) -> None:
        require("paho.mqtt.client")
        host, port = broker
        self.kind, self.name, self.log = kind, name, log
        with open(log, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(DEVICE), "--kind", kind, "--name", name, "--prefix", prefix,
                 "--host", host, "--port", str(port)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1,
            )
        self.lines = Lines(self.proc, log)
        assert self.lines.next(20, f"{kind} device connecting") == "ha_device: connected"

    def ctl(self, word: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        answer = self.lines.next(5, f"{self.kind} device answering {word!r}")
        assert answer.startswith(f"ok {word}"), answer
        return answer.removeprefix(f"ok {word}").strip()

    def power_cut(self) -> None:
        self.proc.kill()
        self.proc.wait()


def clear_retained(broker: tuple[str, int], prefix: str) -> None:
    """Removes every retained config under the prefix (an empty retained message each)."""
    require("paho.mqtt.client")
    import paho.mqtt.client as mqtt

    seen: list[str] = []
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"cleaner-{uuid.uuid4().hex[:8]}")
    client.on_message = lambda c, u, m: seen.append(m.topic) if m.retain and m.payload else None
    client.connect(*broker)
    client.subscribe(f"{prefix}/#")
    client.loop_start()
    time.sleep(1.0)
    for topic in seen:
        client.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)
    client.loop_stop()
    client.disconnect()


@pytest.fixture
def fleet(tmp_path: Path, broker: tuple[str, int]) -> Iterator[tuple[dict[str, HaDevice], str]]:  # noqa: F811
    tag = uuid.uuid4().hex[:6]
    prefix = f"cltest-{tag}/homeassistant"
    names = {"esphome": f"esp-{tag}", "tasmota": f"plug-{tag}", "z2m": f"zb-{tag}"}
    devices: dict[str, HaDevice] = {}
    try:
        for kind, name in names.items():
            devices[kind] = HaDevice(kind, name, prefix, broker, tmp_path / f"{kind}.log")
        yield devices, prefix
    finally:
        for d in devices.values():
            stop(d.proc)
        clear_retained(broker, prefix)


async def online(session, device: str) -> None:
    with anyio.fail_after(15):
        while (await call(session, "get_device_state", {"device": device}))["liveness"] != "online":
            await anyio.sleep(0.05)


async def test_discovered_devices_become_a_plant_that_switches_them(
    closedloop_bin: Path,
    tmp_path: Path,
    broker: tuple[str, int],  # noqa: F811
    fleet: tuple[dict[str, HaDevice], str],
    request: pytest.FixtureRequest,
) -> None:
    devices, prefix = fleet
    host, port = broker
    tag = devices["esphome"].name.split("-")[1]
    plant = tmp_path / "plant.toml"
    made = subprocess.run(
        [str(closedloop_bin), "init", "--mqtt", f"mqtt://{host}:{port}", "--prefix", prefix,
         "--listen", "2s", "--out", str(plant)],
        capture_output=True, text=True, timeout=60,
    )
    assert made.returncode == 0, made.stderr
    assert f"wrote {plant}: 3 devices, 4 signals, 3 actions, 0 skipped" in made.stderr, made.stderr
    assert "is read through the template" not in made.stderr, made.stderr
    assert f"zb_{tag}: its entities name 2 availability topics" in made.stderr, made.stderr
    text = plant.read_text(encoding="utf-8")
    assert f'status_topic = "zigbee2mqtt/zb-{tag}/availability", status_json = "/state"' in text, text
    assert f'status_topic = "tele/plug-{tag}/LWT", online = "Online", offline = "Offline"' in text, text
    assert 'json = "/POWER"' in text and 'json = "/state"' in text, text
    assert "max_silence_s = 5.0" in text, text  # the ESPHome sensor's expire_after
    tools = {
        "esphome": f"esp_{tag}_switch_relay",
        "tasmota": f"plug_{tag}_switch_power",
        "z2m": f"zb_{tag}_switch",
    }
    async with serve(closedloop_bin, plant, request) as session:
        for kind, d in devices.items():
            d.ctl("announce")  # a boot: availability and state, live
            await online(session, tools[kind].split("_switch")[0])
        for kind, d in devices.items():
            for on in (True, False, True):
                sc = await act(session, tools[kind], {"on": on})
                assert outcome(sc) == ("completed", None), (kind, sc)
                assert sc["verified"] is True and not sc.get("already"), sc
                assert d.ctl("relay?") == ("on" if on else "off"), kind
            # Asked for the state it is in: its echo of the command confirms it, and says so.
            sc = await act(session, tools[kind], {"on": True})
            assert outcome(sc) == ("completed", None), (kind, sc)
            assert sc["already"] is True, sc
            assert d.ctl("relay?") == "on", kind
        devices["esphome"].power_cut()
        device = f"esp_{tag}"
        with anyio.fail_after(15):
            while (await call(session, "get_device_state", {"device": device}))["liveness"] != "offline":
                await anyio.sleep(0.05)
        sc = await call(session, tools["esphome"], {"on": False, "wait_s": 2})
        assert outcome(sc) == ("rejected", "DEVICE_OFFLINE"), sc
