"""A pump skid served over OPC UA by asyncua (a stack no one here wrote), for
tests/python/test_init_opcua.py: the address space `closedloop init --opcua` surveys.

Address space (namespace "urn:closedloop:test:skid", index 2):
  ns=2;s=PumpSkid                object, with a Description
  ns=2;s=PumpSkid.Speed          Double, read-only; EngineeringUnits "rpm"; ramps to the setpoint
                                 while running
  ns=2;s=PumpSkid.SpeedSetpoint  Double, writable; EngineeringUnits "rpm", EURange 0..3000
  ns=2;s=PumpSkid.Pressure       Float, read-only; EngineeringUnits "bar"
  ns=2;s=PumpSkid.Running        Boolean, read-only
  ns=2;s=PumpSkid.Mode           String, read-only (a signal cannot hold it)
  ns=2;s=PumpSkid.Start()        sets Running
  ns=2;s=PumpSkid.Stop()         clears Running
  ns=2;s=PumpSkid.SetMode(mode: Int32, "0 manual, 1 auto")
  ns=2;s=PumpSkid.LoadRecipe(steps: Double[])  an array argument (a parameter cannot be one)

Prints its endpoint as the first stdout line once it accepts connections. stdin takes `state?`,
answered `ok state? setpoint=<x> running=<true|false> mode=<n>`: the skid as it is (the test's
ground truth). Runs until stdin closes.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from asyncua import Server, ua
from asyncua.common.methods import uamethod

NAMESPACE = "urn:closedloop:test:skid"


async def describe(node, text: str) -> None:
    await node.write_attribute(ua.AttributeIds.Description, ua.DataValue(ua.Variant(ua.LocalizedText(text))))


async def unit(node, idx: int, name: str, symbol: str, low: float | None = None, high: float | None = None) -> None:
    eu = ua.EUInformation(NamespaceUri="http://www.opcfoundation.org/UA/units/un/cefact", UnitId=-1,
                          DisplayName=ua.LocalizedText(symbol), Description=ua.LocalizedText(symbol))
    await node.add_property(ua.NodeId(f"{name}.EngineeringUnits", idx), ua.QualifiedName("EngineeringUnits", 0), eu)
    if low is not None:
        await node.add_property(ua.NodeId(f"{name}.EURange", idx), ua.QualifiedName("EURange", 0),
                                ua.Range(Low=low, High=high))


def argument(name: str, type_id: int, description: str, rank: int = -1) -> ua.Argument:
    a = ua.Argument()
    a.Name = name
    a.DataType = ua.NodeId(type_id)
    a.ValueRank = rank
    a.Description = ua.LocalizedText(description)
    return a


async def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = Server()
    await server.init()
    server.set_endpoint("opc.tcp://127.0.0.1:0/closedloop/skid")
    server.set_server_name("closedloop test pump skid (asyncua)")
    server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
    idx = await server.register_namespace(NAMESPACE)
    skid = await server.nodes.objects.add_object(ua.NodeId("PumpSkid", idx), ua.QualifiedName("PumpSkid", idx))
    await describe(skid, "Pump skid 1: a centrifugal pump, its drive and its pressure sensor")

    async def var(name: str, value, vtype, writable: bool = False):
        node = await skid.add_variable(ua.NodeId(f"PumpSkid.{name}", idx), ua.QualifiedName(name, idx), value,
                                       varianttype=vtype)
        if writable:
            await node.set_writable()
        return node

    speed = await var("Speed", 0.0, ua.VariantType.Double)
    await unit(speed, idx, "PumpSkid.Speed", "rpm")
    setpoint = await var("SpeedSetpoint", 0.0, ua.VariantType.Double, writable=True)
    await unit(setpoint, idx, "PumpSkid.SpeedSetpoint", "rpm", 0.0, 3000.0)
    await describe(setpoint, "The drive's speed setpoint")
    pressure = await var("Pressure", 1.2, ua.VariantType.Float)
    await unit(pressure, idx, "PumpSkid.Pressure", "bar")
    running = await var("Running", False, ua.VariantType.Boolean)
    mode_text = await var("Mode", "manual", ua.VariantType.String)
    mode = {"n": 0}

    @uamethod
    async def start(parent: ua.NodeId) -> None:
        await running.write_value(True)

    @uamethod
    async def stop(parent: ua.NodeId) -> None:
        await running.write_value(False)

    @uamethod
    async def set_mode(parent: ua.NodeId, n: int) -> None:
        mode["n"] = int(n)
        await mode_text.write_value("auto" if n == 1 else "manual")

    @uamethod
    async def load_recipe(parent: ua.NodeId, steps: list[float]) -> None:
        return None

    await skid.add_method(ua.NodeId("PumpSkid.Start", idx), ua.QualifiedName("Start", idx), start, [], [])
    await skid.add_method(ua.NodeId("PumpSkid.Stop", idx), ua.QualifiedName("Stop", idx), stop, [], [])
    await skid.add_method(ua.NodeId("PumpSkid.SetMode", idx), ua.QualifiedName("SetMode", idx), set_mode,
                          [argument("mode", ua.ObjectIds.Int32, "0 manual, 1 auto")], [])
    await skid.add_method(ua.NodeId("PumpSkid.LoadRecipe", idx), ua.QualifiedName("LoadRecipe", idx), load_recipe,
                          [argument("steps", ua.ObjectIds.Double, "speeds, one per step", rank=1)], [])

    async def ramp() -> None:
        current = 0.0
        while True:
            await asyncio.sleep(0.05)
            target = float(await setpoint.read_value()) if await running.read_value() else 0.0
            if current != target:
                current = min(target, current + 50.0) if target > current else max(target, current - 50.0)
                await speed.write_value(ua.Variant(current, ua.VariantType.Double))

    async with server:
        ramping = asyncio.create_task(ramp())
        print(f"opc.tcp://127.0.0.1:{server.bserver.port}/closedloop/skid", flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            if line.strip() == "state?":
                sp = float(await setpoint.read_value())
                run = "true" if await running.read_value() else "false"
                print(f"ok state? setpoint={sp} running={run} mode={mode['n']}", flush=True)
        ramping.cancel()


if __name__ == "__main__":
    asyncio.run(main())
