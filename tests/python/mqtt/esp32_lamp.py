"""An ESP32-style lamp firmware in paho-mqtt, as a stand-in no one here wrote the stack of.

It behaves like common Tasmota/ESPHome-style firmware:
- connects with the last will `{prefix}/status` = `offline` (retained) and then publishes
  `online` (retained);
- takes commands on `{prefix}/cmd` as JSON `{"state": "ON" | "OFF", "id": ...}`;
- publishes its state on `{prefix}/tele` as JSON `{"POWER": "ON" | "OFF", "uptime_s": n}`
  after every command, on change, and every `--period` seconds.

The relay takes `--pull-in-ms` to switch after a command. The firmware reports the lamp (a
current sensor on the lamp's wire), not what it commanded.

stdin takes control lines, each answered `ok LINE` on stdout:
- `stuck`   the relay no longer follows commands (still reports, still connected);
- `freeze`  the firmware hangs: connected, but nothing is published and commands are ignored;
- `nc`      the lamp is wired to the relay's normally-closed contact: "ON" energises the relay
            and so puts the lamp out (and the lamp is lit while the relay rests);
- `receipt` the firmware reports the lamp as soon as a command arrives, before the relay moves
            (a telemetry acknowledgement, as many firmwares send);
- `deaf`    commands are ignored (not acted on, not reported); the heartbeat goes on, so the
            board stays online;
- `thaw`    back to normal;
- `lamp?`   answered `ok lamp? on|off`: the lamp as it physically is (the test's ground truth).
Killing the process (SIGKILL) is a power cut: the TCP connection drops without DISCONNECT, so the
broker publishes the will.

Prints `esp32_lamp: connected` once the broker has accepted it and `online` is out.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import paho.mqtt.client as mqtt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--period", type=float, default=0.3)
    ap.add_argument("--pull-in-ms", type=float, default=30)
    args = ap.parse_args()

    lock = threading.Lock()
    state = {"relay": False, "stuck": False, "frozen": False, "nc": False, "receipt": False, "deaf": False}

    def lamp_lit() -> bool:
        return state["relay"] != state["nc"]
    started = time.monotonic()
    connected = threading.Event()

    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=f"esp32-{args.prefix.replace('/', '-')}",
        protocol=mqtt.MQTTv5,
    )
    client.will_set(f"{args.prefix}/status", "offline", qos=1, retain=True)

    def report() -> None:
        with lock:
            if state["frozen"]:
                return
            body = {"POWER": "ON" if lamp_lit() else "OFF", "uptime_s": round(time.monotonic() - started, 1)}
        client.publish(f"{args.prefix}/tele", json.dumps(body), qos=1)

    def on_connect(c: mqtt.Client, _u: object, _f: object, reason: object, _p: object) -> None:
        c.subscribe(f"{args.prefix}/cmd", qos=1)
        c.publish(f"{args.prefix}/status", "online", qos=1, retain=True).wait_for_publish(5)
        connected.set()

    def on_message(_c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        try:
            cmd = json.loads(msg.payload)
            want = {"ON": True, "OFF": False}[cmd["state"]]
        except (ValueError, KeyError, TypeError):
            return
        with lock:
            if state["frozen"] or state["deaf"]:
                return
            receipt = state["receipt"]
        if receipt:
            report()

        def switch() -> None:
            with lock:
                if state["frozen"]:
                    return
                if not state["stuck"]:
                    state["relay"] = want
            report()

        threading.Timer(args.pull_in_ms / 1000, switch).start()

    client.on_connect = on_connect
    client.on_message = on_message
    client.connect(args.host, args.port, keepalive=5)
    client.loop_start()
    if not connected.wait(10):
        print("esp32_lamp: no CONNACK within 10 s", file=sys.stderr)
        sys.exit(1)
    print("esp32_lamp: connected", flush=True)

    def heartbeat() -> None:
        while True:
            time.sleep(args.period)
            report()

    threading.Thread(target=heartbeat, daemon=True).start()
    for line in sys.stdin:
        word = line.strip()
        with lock:
            if word in ("stuck", "nc", "receipt", "deaf"):
                state[word] = True
            elif word == "freeze":
                state["frozen"] = True
            elif word == "thaw":
                state["frozen"] = state["stuck"] = state["deaf"] = False
            elif word == "lamp?":
                word = f"lamp? {'on' if lamp_lit() else 'off'}"
            else:
                print(f"error unknown control {word!r}", flush=True)
                continue
        print(f"ok {word}", flush=True)


if __name__ == "__main__":
    main()
