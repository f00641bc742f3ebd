"""A heater switch and an oven probe as Home Assistant-shaped firmwares publish them (ESPHome,
Tasmota), in paho-mqtt: the device whose payloads are not always values.

- commands on `{prefix}/heater/set` (`ON` / `OFF`), the relay's state on `{prefix}/heater/state`
  (`ON` / `OFF`) `--pull-in-ms` after a command it carries out, and on every control below;
- the probe on `{prefix}/probe` as JSON `{"temperature": t}`.

stdin takes control lines, each answered `ok WORD` on stdout:
- `say TEXT`         publish TEXT (`-` for an empty payload) on the heater's state topic now;
- `retain TEXT`      publish TEXT retained on the heater's state topic;
- `ignore TEXT`      from now on a command is not carried out: the firmware publishes TEXT
                     (`None`, Home Assistant's "unknown") on the state topic instead;
- `obey`             commands are carried out again;
- `relay ON|OFF`     switch the relay by hand (a person at the device), reporting nothing;
- `fault TEXT`       publish TEXT on `{prefix}/heater/fault` (a fault flag sent only on change);
- `probe BODY`       publish BODY as it is on the probe topic (`{"temperature": 45.0}`, `nan`,
                     `{"temperature": null}`);
- `probe-retain BODY` publish BODY retained on the probe topic (`-` clears it);
- `relay?`           answered `ok relay? on|off`: the relay as it physically is (ground truth).

Prints `ha_switch: connected` once the broker accepted it.
"""

from __future__ import annotations

import argparse
import sys
import threading

import paho.mqtt.client as mqtt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--pull-in-ms", type=float, default=30)
    args = ap.parse_args()
    lock = threading.Lock()
    state = {"relay": False, "ignore": None}
    connected = threading.Event()
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=f"ha-switch-{args.prefix.replace('/', '-')}",
        protocol=mqtt.MQTTv5,
    )
    state_topic = f"{args.prefix}/heater/state"

    def publish(topic: str, text: str, retain: bool = False) -> None:
        payload = b"" if text == "-" else text.encode()
        client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(5)

    def report() -> None:
        with lock:
            word = "ON" if state["relay"] else "OFF"
        publish(state_topic, word)

    def on_connect(c: mqtt.Client, _u: object, _f: object, _r: object, _p: object) -> None:
        c.subscribe(f"{args.prefix}/heater/set", qos=1)
        connected.set()

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        want = {b"ON": True, b"OFF": False}.get(msg.payload.strip())
        if want is None:
            return
        with lock:
            instead = state["ignore"]
        if instead is not None:
            threading.Thread(target=publish, args=(state_topic, instead), daemon=True).start()
            return

        def switch() -> None:
            with lock:
                state["relay"] = want
            report()

        threading.Timer(args.pull_in_ms / 1000, switch).start()

    client.on_connect = on_connect
    client.on_message = on_message
    client.connect(args.host, args.port, keepalive=5)
    client.loop_start()
    if not connected.wait(10):
        print("ha_switch: no CONNACK within 10 s", file=sys.stderr)
        sys.exit(1)
    print("ha_switch: connected", flush=True)
    for line in sys.stdin:
        word, _, rest = line.strip().partition(" ")
        if word == "say":
            publish(state_topic, rest)
        elif word == "retain":
            publish(state_topic, rest, retain=True)
        elif word == "ignore":
            with lock:
                state["ignore"] = rest
        elif word == "obey":
            with lock:
                state["ignore"] = None
        elif word == "relay":
            with lock:
                state["relay"] = rest == "ON"
        elif word == "fault":
            publish(f"{args.prefix}/heater/fault", rest)
        elif word == "probe":
            publish(f"{args.prefix}/probe", rest)
        elif word == "probe-retain":
            publish(f"{args.prefix}/probe", rest, retain=True)
        elif word == "relay?":
            with lock:
                rest = "on" if state["relay"] else "off"
        else:
            print(f"error unknown control {word!r}", flush=True)
            continue
        print(f"ok {word} {rest}".rstrip(), flush=True)


if __name__ == "__main__":
    main()
