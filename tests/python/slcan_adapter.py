"""An slcan (Lawicel) USB-CAN adapter, emulated on a serial port: the adapter's side of the
protocol, for tests of closedloop's `can` driver over one end of a socat pty pair.

- Answers `\\r` to the commands a host sends (`S0`-`S8`, `O`, `C`, `L`, `Z0`/`Z1`), `V1013\\r` to
  `V`, `F00\\r` to `F`, BEL to anything else, and BEL to frames sent while the channel is closed.
- While the channel is open, sends the frames given with `--send` every PERIOD_MS, their data
  encoded by cantools from `--dbc` (so the layout is cantools', not closedloop's).
- Acknowledges every frame the host sends and records it: on stdout and, with `--record`, in a
  file, one JSON line each, decoded by cantools when the DBC knows the id.
- `--timestamps` appends slcan's 4-hex-digit millisecond timestamp to sent frames; `--noise`
  sends a garbage line before every third frame and splits frames across writes, to exercise
  the host's resynchronisation.

Events go to stdout as JSON lines: {"event": "ready"} once the port is open, then "bitrate",
"open", "close", "sent" (first frame of each --send only), "rx", and "port_closed" when the
other end of the pty goes away. SIGTERM or SIGINT stop it cleanly (exit 0).

    python slcan_adapter.py --port /dev/pts/7 --dbc motohawk.dbc \\
        --send 'ExampleMessage:Temperature=251.5,AverageRadius=1.2,Enable=1@20' --record rx.jsonl
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import cantools
import serial

BITRATES = {
    "S0": 10_000,
    "S1": 20_000,
    "S2": 50_000,
    "S3": 100_000,
    "S4": 125_000,
    "S5": 250_000,
    "S6": 500_000,
    "S7": 800_000,
    "S8": 1_000_000,
}
BEL = b"\x07"


@dataclass
class Periodic:
    """One --send: a message, its signal values, its period, and when it is next due."""

    message: Any  # cantools Message
    values: dict[str, float]
    period_s: float
    data: bytes = b""
    due: float = 0.0
    count: int = 0


def parse_send(db: Any, spec: str) -> Periodic:
    """`MSG:SIG=VAL,...@PERIOD_MS` → a Periodic whose data cantools encodes (strictly: values
    outside the DBC's ranges are an error here, as they would be for a real device's firmware)."""
    try:
        body, period = spec.rsplit("@", 1)
        name, assignments = body.split(":", 1)
        values = {k: float(v) for k, v in (a.split("=", 1) for a in assignments.split(",") if a)}
        period_s = float(period) / 1000.0
    except ValueError as exc:
        raise SystemExit(f"slcan_adapter: --send {spec!r}: expected MSG:SIG=VAL,...@PERIOD_MS ({exc})")
    if period_s <= 0:
        raise SystemExit(f"slcan_adapter: --send {spec!r}: the period must be positive")
    message = db.get_message_by_name(name)
    p = Periodic(message=message, values=values, period_s=period_s)
    p.data = message.encode(values)
    return p


def frame_line(frame_id: int, extended: bool, data: bytes, timestamp_ms: int | None) -> bytes:
    """The slcan line an adapter sends for a received data frame."""
    head = f"T{frame_id:08X}" if extended else f"t{frame_id:03X}"
    line = f"{head}{len(data)}{data.hex().upper()}"
    if timestamp_ms is not None:
        line += f"{timestamp_ms % 0xEA60:04X}"
    return line.encode("ascii") + b"\r"


def parse_frame(line: str) -> dict[str, Any] | None:
    """A host's `t`/`T`/`r`/`R` line as a dict, or None if malformed."""
    kind = line[:1]
    extended = kind in ("T", "R")
    id_len = 8 if extended else 3
    try:
        frame_id = int(line[1 : 1 + id_len], 16)
        dlc = int(line[1 + id_len], 16)
        rest = line[2 + id_len :]
        if dlc > 8:
            return None
        if kind in ("t", "T"):
            if len(rest) != 2 * dlc:
                return None
            data = bytes.fromhex(rest)
        else:
            if rest:
                return None
            data = b""
    except (ValueError, IndexError):
        return None
    return {"id": frame_id, "extended": extended, "rtr": kind in ("r", "R"), "dlc": dlc, "data": data}


@dataclass
class SlcanAdapter:
    port: str
    db: Any  # cantools Database, or None
    sends: list[Periodic] = field(default_factory=list)
    record: TextIO | None = None
    timestamps: bool = False
    noise: bool = False
    out: TextIO = sys.stdout
    is_open: bool = False
    bitrate: int | None = None
    received: list[dict[str, Any]] = field(default_factory=list)
    _stop: bool = False

    def emit(self, event: dict[str, Any]) -> None:
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()

    def stop(self, *_: Any) -> None:
        self._stop = True

    def decode(self, frame_id: int, data: bytes) -> dict[str, Any] | None:
        if self.db is None:
            return None
        try:
            message = self.db.get_message_by_frame_id(frame_id)
            decoded = message.decode(data, decode_choices=False)
        except (KeyError, ValueError, cantools.database.errors.DecodeError):
            return None
        return {"message": message.name, "values": decoded}

    def answer(self, line: str) -> bytes:
        """The reply to one host line (without its `\\r`)."""
        cmd = line[:1]
        if line in BITRATES:
            if self.is_open:
                return BEL
            self.bitrate = BITRATES[line]
            self.emit({"event": "bitrate", "bitrate": self.bitrate})
            return b"\r"
        if line in ("O", "L"):
            if self.is_open:
                return BEL
            self.is_open = True
            for p in self.sends:
                p.due = time.monotonic()
            self.emit({"event": "open", "listen_only": line == "L"})
            return b"\r"
        if line == "C":
            if not self.is_open:
                return BEL
            self.is_open = False
            self.emit({"event": "close"})
            return b"\r"
        if line in ("Z0", "Z1"):
            return b"\r"
        if line == "V":
            return b"V1013\r"
        if line == "F":
            return b"F00\r"
        if cmd in ("t", "T", "r", "R"):
            frame = parse_frame(line)
            if frame is None or not self.is_open:
                return BEL
            entry = {
                "event": "rx",
                "line": line,
                "id": frame["id"],
                "extended": frame["extended"],
                "rtr": frame["rtr"],
                "hex": frame["data"].hex(),
                "decoded": None if frame["rtr"] else self.decode(frame["id"], frame["data"]),
            }
            self.received.append(entry)
            self.emit(entry)
            if self.record is not None:
                self.record.write(json.dumps(entry) + "\n")
                self.record.flush()
            return b"\r"
        return BEL

    def run(self) -> None:
        """Serves the port until stopped or until the other end goes away."""
        ser = serial.Serial(self.port, 115200, timeout=0.002)
        self.emit({"event": "ready", "port": self.port})
        buf = b""
        start = time.monotonic()
        try:
            while not self._stop:
                try:
                    chunk = ser.read(ser.in_waiting or 1)
                except (serial.SerialException, OSError) as exc:
                    self.emit({"event": "port_closed", "reason": str(exc)})
                    return
                buf += chunk
                while b"\r" in buf:
                    line, buf = buf.split(b"\r", 1)
                    text = line.decode("ascii", errors="replace").strip("\n")
                    ser.write(self.answer(text))
                if len(buf) > 256:  # no `\r` in sight: garbage, drop it
                    buf = b""
                now = time.monotonic()
                for p in self.sends:
                    if not self.is_open or now < p.due:
                        continue
                    ts = int((now - start) * 1000) if self.timestamps else None
                    line = frame_line(p.message.frame_id, p.message.is_extended_frame, p.data, ts)
                    if self.noise and p.count % 3 == 0:
                        ser.write(b"\x00noise!\r")
                        half = len(line) // 2
                        ser.write(line[:half])
                        ser.flush()
                        time.sleep(0.001)
                        ser.write(line[half:])
                    else:
                        ser.write(line)
                    if p.count == 0:
                        self.emit({"event": "sent", "message": p.message.name, "hex": p.data.hex()})
                    p.count += 1
                    p.due += p.period_s
                    if p.due < now:  # fell behind (a stalled host): do not burst to catch up
                        p.due = now + p.period_s
        finally:
            ser.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", required=True, help="the serial port (one end of a socat pty pair)")
    ap.add_argument("--dbc", help="DBC file for --send and for decoding received frames")
    ap.add_argument("--send", action="append", default=[], metavar="MSG:SIG=VAL,...@PERIOD_MS")
    ap.add_argument("--record", type=Path, help="append received frames here, one JSON line each")
    ap.add_argument("--timestamps", action="store_true", help="append 4-hex-digit timestamps")
    ap.add_argument("--noise", action="store_true", help="garbage lines and split writes")
    args = ap.parse_args(argv)
    if args.send and not args.dbc:
        ap.error("--send needs --dbc")
    db = cantools.database.load_file(args.dbc, database_format="dbc", strict=False) if args.dbc else None
    sends = [parse_send(db, s) for s in args.send]
    record = open(args.record, "a", encoding="utf-8") if args.record else None
    adapter = SlcanAdapter(
        port=args.port, db=db, sends=sends, record=record, timestamps=args.timestamps, noise=args.noise
    )
    signal.signal(signal.SIGTERM, adapter.stop)
    signal.signal(signal.SIGINT, adapter.stop)
    try:
        adapter.run()
    finally:
        if record is not None:
            record.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
