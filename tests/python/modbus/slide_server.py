#!/usr/bin/env python3
"""A relay (unit 1) and a linear slide (unit 2) on pymodbus 3.16, a Modbus stack no one here wrote.

    slide_server.py --tcp 127.0.0.1:0        # Modbus TCP; prints "slide_server: listening on HOST:PORT"
    slide_server.py --serial /dev/pts/N      # Modbus RTU, 19200 8N1; prints "slide_server: serving PATH"

Register maps (0-based, one block per table, 16 entries each; other addresses answer exception 2):

- relay, unit 1: coil 0 = commanded; discrete input 0 = auxiliary contact, follows coil 0.
- slide, unit 2: holding 0-1 = target, i32 in 0.01 mm, high word first; coil 0 = start (self-clearing:
  the slide jumps to the target and the coil reads false again shortly after); coil 1 = stop;
  holding 2-3 = position (same encoding); discrete input 0 = moving; discrete input 1 = fault.

Control, one command a line on stdin, each answered "ok ..." on stdout once applied:

    fail UNIT CODE    # every later write to UNIT answers Modbus exception CODE (2, 3, 4, ...)
    clear UNIT        # writes to UNIT succeed again
    writes UNIT       # answers "ok writes UNIT N": the writes UNIT accepted so far

Reads are always answered, so the device stays online while it refuses writes.

Built on pymodbus's SimDevice datastore (pymodbus.simulator): each unit's four blocks are plain
SimData tables, and the device's `action` callback (called on every access, before pymodbus reads
or writes the block) keeps a small Python model as the truth and copies it into the block.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading

from pymodbus.constants import ExcCodes
from pymodbus.framer import FramerType
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice
from pymodbus.simulator.simutils import SimUtils

SIZE = 16  # entries per table
BLOCK_OF_FC = {1: "c", 5: "c", 15: "c", 2: "d", 4: "i", 3: "h", 6: "h", 16: "h", 22: "h", 23: "h"}
SELF_CLEAR_S = 0.05


def announce(line: str) -> None:
    print(line, flush=True)


class Unit:
    """One Modbus unit: the model (`c`, `d`, `h`, `i`), the injected exception, the device logic."""

    def __init__(self, unit: int) -> None:
        self.unit = unit
        self.c = [False] * SIZE
        self.d = [False] * SIZE
        self.h = [0] * SIZE
        self.i = [0] * SIZE
        self.inject: ExcCodes | None = None
        self.writes = 0  # write requests accepted: what a test counts to show nothing arrived

    def written(self, block: str, address: int, values: list) -> None:
        """A write was accepted: apply it, then run the device's logic."""
        self.writes += 1
        table = getattr(self, block)
        for k, v in enumerate(values):
            table[address + k] = bool(v) if block == "c" else int(v)
        self.after_write(block, address, len(values))

    def after_write(self, block: str, address: int, count: int) -> None:
        pass

    def sync(self, block: str, registers: list[int]) -> None:
        """Copy the model's table into pymodbus's block (bits are packed 16 to a register)."""
        if block in ("c", "d"):
            registers[0] = SimUtils.bitsToRegisters(list(getattr(self, block)))[0]
        else:
            registers[:SIZE] = list(getattr(self, block))

    async def action(
        self,
        func_code: int,
        _start_address: int,
        address: int,
        _count: int,
        registers: list[int],
        set_values: list[int] | list[bool] | None,
    ) -> ExcCodes | None:
        block = BLOCK_OF_FC[func_code]
        if set_values is not None:
            if self.inject is not None:
                return self.inject
            values = set_values if isinstance(set_values, list) else [set_values]
            self.written(block, address, list(values))
        self.sync(block, registers)
        return None

    def device(self) -> SimDevice:
        bits = lambda: [SimData(0, values=[False] * SIZE, datatype=DataType.BITS)]  # noqa: E731
        regs = lambda: [SimData(0, count=SIZE, values=0, datatype=DataType.REGISTERS)]  # noqa: E731
        return SimDevice(self.unit, simdata=(bits(), bits(), regs(), regs()), action=self.action)


class Relay(Unit):
    """Coil 0 drives the relay; its auxiliary contact (discrete input 0) follows it."""

    def after_write(self, block: str, address: int, count: int) -> None:
        self.d[0] = self.c[0]


def i32_words(value: int) -> tuple[int, int]:
    raw = value & 0xFFFFFFFF
    return raw >> 16, raw & 0xFFFF


class Slide(Unit):
    """Start (coil 0) moves the slide to the target at once: no physics, never a fault."""

    def after_write(self, block: str, address: int, count: int) -> None:
        if block == "c" and address <= 0 < address + count and self.c[0]:
            self.h[2], self.h[3] = self.h[0], self.h[1]
            self.d[0] = False  # moving
            # Self-clearing: the start coil keeps the written value for the write's echo and
            # reads false again shortly after.
            asyncio.get_running_loop().call_later(SELF_CLEAR_S, self._clear_start)
        if block == "c" and address <= 1 < address + count and self.c[1]:
            self.d[0] = False
            self.c[1] = False

    def _clear_start(self) -> None:
        self.c[0] = False


def control(loop: asyncio.AbstractEventLoop, units: dict[int, Unit], stopped: asyncio.Future) -> None:
    """Reads control commands from stdin (a thread); applies each on the server's loop."""

    def apply(words: list[str]) -> None:
        try:
            unit = units[int(words[1])]
            if words[0] == "fail":
                unit.inject = ExcCodes(int(words[2]))
            elif words[0] == "clear":
                unit.inject = None
            elif words[0] == "writes":
                announce(f"ok writes {words[1]} {unit.writes}")
                return
            else:
                raise ValueError(words[0])
        except (IndexError, KeyError, ValueError) as exc:
            announce(f"error {' '.join(words)}: {exc!r}")
            return
        announce(f"ok {' '.join(words)}")

    for line in sys.stdin:
        if words := line.split():
            loop.call_soon_threadsafe(apply, words)
    loop.call_soon_threadsafe(stopped.set_result, None)  # stdin closed: the test is gone


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--tcp", metavar="HOST:PORT")
    where.add_argument("--serial", metavar="PATH")
    parser.add_argument("--baud", type=int, default=19200)
    args = parser.parse_args()

    units: dict[int, Unit] = {1: Relay(1), 2: Slide(2)}
    devices = [u.device() for u in units.values()]
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        server = ModbusTcpServer(devices, address=(host, int(port)))
        await server.serve_forever(background=True)
        bound = server.transport.sockets[0].getsockname()
        announce(f"slide_server: listening on {bound[0]}:{bound[1]}")
    else:
        server = ModbusSerialServer(
            devices, framer=FramerType.RTU, port=args.serial, baudrate=args.baud,
            bytesize=8, parity="N", stopbits=1,
        )
        await server.serve_forever(background=True)
        announce(f"slide_server: serving {args.serial}")

    loop = asyncio.get_running_loop()
    stopped = loop.create_future()
    threading.Thread(target=control, args=(loop, units, stopped), daemon=True).start()
    await stopped  # until the process is killed or stdin closes
    await server.shutdown()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
