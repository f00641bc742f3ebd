"""A relay device announcing itself by Home Assistant MQTT discovery, in paho-mqtt, shaped as one
of three firmwares publish it (from their public documentation; no code of theirs):

- `esphome`: abbreviated keys, `homeassistant/switch/<node>/relay/config` with `stat_t`
  `<node>/switch/relay/state` and `cmd_t` `<node>/switch/relay/command` (payloads ON/OFF), and a
  temperature `sensor` with `exp_aft`; availability on `<node>/status` (`online`/`offline`, the
  will); the relay's state retained and republished on every change, the sensor every --period.
- `tasmota`: abbreviated keys with a `~`-free Tasmota topic layout: `stat_t`
  `stat/<topic>/RESULT` with `val_tpl` `{{value_json.POWER}}`, `cmd_t` `cmnd/<topic>/POWER`,
  `avty_t` `tele/<topic>/LWT` with `Online`/`Offline`; the result `{"POWER":"ON"}` after every
  command.
- `z2m`: a Zigbee2MQTT bridge's plug: full keys, `state_topic` `zigbee2mqtt/<name>` (JSON with
  `state` and `linkquality`, read through `value_template` `{{ value_json.state }}`),
  `command_topic` `zigbee2mqtt/<name>/set`, availability as a list — `zigbee2mqtt/bridge/state`
  and the device's own `zigbee2mqtt/<name>/availability` — each read through a value template
  (JSON `{"state":"online"}`), the bridge's will; `/set` takes
  `{"state": "ON"}` or a plain `ON` (taken as the state).

Discovery configs are published retained once connected. stdin takes control lines, each answered
`ok LINE`: `announce` (publish availability and state again, live: what a device does when it
boots), `relay?` (answered `ok relay? on|off`, the relay as it physically is). Killing the
process (SIGKILL) is a power cut: the broker publishes the will.

Prints `ha_device: connected` once the broker accepted it and the discovery configs are out.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import paho.mqtt.client as mqtt


def layout(kind: str, name: str, prefix: str) -> dict:
    """Topics, payloads and discovery configs of one firmware kind."""
    if kind == "esphome":
        dev = {"ids": f"{name}-mac", "name": name, "sw": "esphome v2024.6.0", "mdl": "esp32dev", "mf": "espressif"}
        return {
            "will": (f"{name}/status", "offline", "online"),
            "command": f"{name}/switch/relay/command",
            "state": lambda on: [(f"{name}/switch/relay/state", "ON" if on else "OFF", True)],
            "tele": lambda t: [(f"{name}/sensor/temperature/state", f"{t:.1f}", True)],
            "configs": {
                f"{prefix}/switch/{name}/relay/config": {
                    "name": "Relay", "stat_t": f"{name}/switch/relay/state",
                    "cmd_t": f"{name}/switch/relay/command", "avty_t": f"{name}/status",
                    "uniq_id": f"{name}-relay", "dev": dev,
                },
                f"{prefix}/sensor/{name}/temperature/config": {
                    "name": "Temperature", "stat_t": f"{name}/sensor/temperature/state",
                    "avty_t": f"{name}/status", "unit_of_meas": "°C", "dev_cla": "temperature",
                    "stat_cla": "measurement", "exp_aft": 5, "uniq_id": f"{name}-temp", "dev": dev,
                },
            },
        }
    if kind == "tasmota":
        dev = {"ids": [f"{name}-id"], "name": name, "mdl": "Sonoff Basic", "mf": "Tasmota", "sw": "13.4.0"}
        return {
            "will": (f"tele/{name}/LWT", "Offline", "Online"),
            "command": f"cmnd/{name}/POWER",
            "state": lambda on: [
                (f"stat/{name}/RESULT", json.dumps({"POWER": "ON" if on else "OFF"}), False),
                (f"stat/{name}/POWER", "ON" if on else "OFF", False),
            ],
            "tele": lambda t: [(f"tele/{name}/STATE", json.dumps({"Uptime": "0T00:00:10", "Vcc": 3.2}), False)],
            "configs": {
                f"{prefix}/switch/{name}-id_RL_1/config": {
                    "name": "Power", "stat_t": f"stat/{name}/RESULT", "val_tpl": "{{value_json.POWER}}",
                    "cmd_t": f"cmnd/{name}/POWER", "pl_on": "ON", "pl_off": "OFF",
                    "avty_t": f"tele/{name}/LWT", "pl_avail": "Online", "pl_not_avail": "Offline",
                    "uniq_id": f"{name}-id_RL_1", "dev": dev,
                },
            },
        }
    dev = {"identifiers": [f"zigbee2mqtt_{name}"], "name": name, "model": "Smart plug (TS011F)",
           "manufacturer": "TuYa", "via_device": "zigbee2mqtt_bridge"}
    return {
        "will": ("zigbee2mqtt/bridge/state", json.dumps({"state": "offline"}), json.dumps({"state": "online"})),
        "availability": (f"zigbee2mqtt/{name}/availability", json.dumps({"state": "online"})),
        "command": f"zigbee2mqtt/{name}/set",
        "state": lambda on: [(f"zigbee2mqtt/{name}", json.dumps({"state": "ON" if on else "OFF", "linkquality": 120}), False)],
        "tele": lambda t: [],
        "configs": {
            f"{prefix}/switch/{name}/switch/config": {
                "availability": [
                    {"topic": "zigbee2mqtt/bridge/state", "value_template": "{{ value_json.state }}"},
                    {"topic": f"zigbee2mqtt/{name}/availability", "value_template": "{{ value_json.state }}"},
                ],
                "availability_mode": "all",
                "command_topic": f"zigbee2mqtt/{name}/set", "device": dev, "name": None,
                "object_id": name, "payload_off": "OFF", "payload_on": "ON",
                "state_topic": f"zigbee2mqtt/{name}", "unique_id": f"{name}_switch_zigbee2mqtt",
                "value_template": "{{ value_json.state }}",
            },
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["esphome", "tasmota", "z2m"], required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--prefix", required=True, help="the discovery prefix")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--period", type=float, default=1.0)
    args = ap.parse_args()
    lay = layout(args.kind, args.name, args.prefix)
    lock = threading.Lock()
    relay = {"on": False, "temp": 21.0}
    connected = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"ha-{args.kind}-{args.name}")
    will_topic, offline, online = lay["will"]
    client.will_set(will_topic, offline, qos=1, retain=True)

    def publish_state() -> None:
        for topic, payload, retain in lay["state"](relay["on"]):
            client.publish(topic, payload, qos=1, retain=retain)

    def announce() -> None:
        client.publish(will_topic, online, qos=1, retain=True)
        if "availability" in lay:
            # The bridge says each device's own availability beside its own state.
            topic, payload = lay["availability"]
            client.publish(topic, payload, qos=1, retain=True)
        publish_state()

    def on_connect(c, userdata, flags, reason, props=None) -> None:
        c.subscribe(lay["command"], qos=1)
        connected.set()

    def on_message(c, userdata, msg) -> None:
        word = msg.payload.decode(errors="replace").strip().upper()
        if args.kind == "z2m" and word.startswith("{"):
            # The bridge takes {"state": ...} on /set, and a plain payload as the state.
            word = str(json.loads(msg.payload).get("state", "")).upper()
        with lock:
            if word in ("ON", "OFF"):
                relay["on"] = word == "ON"
            elif word == "TOGGLE":
                relay["on"] = not relay["on"]
            publish_state()

    client.on_connect = on_connect
    client.on_message = on_message
    client.connect(args.host, args.port, keepalive=5)
    client.loop_start()
    if not connected.wait(10):
        print("ha_device: the broker never accepted the connection", file=sys.stderr)
        sys.exit(1)
    # Published from this thread: waiting for the broker's PUBACK inside a paho callback would
    # block the very loop that reads it.
    sent = [client.publish(t, json.dumps(c), qos=1, retain=True) for t, c in lay["configs"].items()]
    for s in sent:
        s.wait_for_publish(5)
    with lock:
        announce()
    print("ha_device: connected", flush=True)

    def tele() -> None:
        while True:
            time.sleep(args.period)
            with lock:
                relay["temp"] += 0.1
                for topic, payload, retain in lay["tele"](relay["temp"]):
                    client.publish(topic, payload, qos=0, retain=retain)

    threading.Thread(target=tele, daemon=True).start()
    for line in sys.stdin:
        word = line.strip()
        with lock:
            if word == "announce":
                announce()
                print(f"ok {word}", flush=True)
            elif word == "relay?":
                print(f"ok relay? {'on' if relay['on'] else 'off'}", flush=True)
            else:
                print(f"unknown {word}", flush=True)


if __name__ == "__main__":
    main()
