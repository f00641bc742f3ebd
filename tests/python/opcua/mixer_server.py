"""A mixer served over OPC UA by asyncua, a stack no one here wrote, for
tests/python/test_opcua_asyncua.py (issue 10). tests/python/opcua/node/mixer_server.mjs serves
the same mixer with node-opcua.

Address space (namespace "urn:closedloop:test:mixer", index 2):
  ns=2;s=Mixer             object
  ns=2;s=Mixer.Speed       Double, read-only (rpm): ramps towards Setpoint at 200 rpm/s, written
                           by the server with write_value, source and server timestamps set
  ns=2;s=Mixer.Setpoint    Double, writable (rpm)
  ns=2;s=Mixer.Running     Boolean, read-only
  ns=2;s=Mixer.Start(rpm: Double) -> ok: Boolean
                           writes Setpoint and Running = true inside the call, so both values
                           are stamped before the call's answer: a subscription never sends
                           them again, only a read after the answer shows them

Listens on a free loopback port and prints its endpoint URL as the only line on stdout once it
accepts connections; logs go to stderr. Runs until killed or until stdin closes.

`--timestamps` says how the server stamps its values (and whether it stamps client writes):
  both          source and server timestamps set to now (the default, as most servers do)
  none          no timestamp at all, on its own values and on client writes
  source-ahead  only a source timestamp, from a device clock running a minute ahead
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from datetime import datetime, timedelta, timezone

from asyncua import Server, ua
from asyncua.common.methods import uamethod

NAMESPACE = "urn:closedloop:test:mixer"
RAMP_RPM_PER_S = 200.0
TICK_S = 0.05


TIMESTAMPS = "both"


def stamped(value: float | bool, vtype: ua.VariantType) -> ua.DataValue:
    """A value stamped as `--timestamps` says: by default with its source and server timestamps
    set to now, as a device's server would."""
    now = datetime.now(timezone.utc)
    variant = ua.Variant(value, vtype)
    if TIMESTAMPS == "none":
        return ua.DataValue(variant, SourceTimestamp=None, ServerTimestamp=None)
    if TIMESTAMPS == "source-ahead":
        return ua.DataValue(variant, SourceTimestamp=now + timedelta(minutes=1), ServerTimestamp=None)
    return ua.DataValue(variant, SourceTimestamp=now, ServerTimestamp=now)


async def main() -> None:
    global TIMESTAMPS
    ap = argparse.ArgumentParser()
    ap.add_argument("--timestamps", choices=["both", "none", "source-ahead"], default="both")
    TIMESTAMPS = ap.parse_args().timestamps
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    server = Server()
    await server.init()
    # Client writes keep only what the client sent (closedloop sends no timestamp).
    server.set_force_server_timestamp(TIMESTAMPS == "both")
    server.set_endpoint("opc.tcp://127.0.0.1:0/closedloop/mixer")
    server.set_server_name("closedloop test mixer (asyncua)")
    server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
    idx = await server.register_namespace(NAMESPACE)

    mixer = await server.nodes.objects.add_object(ua.NodeId("Mixer", idx), ua.QualifiedName("Mixer", idx))
    speed = await mixer.add_variable(
        ua.NodeId("Mixer.Speed", idx), ua.QualifiedName("Speed", idx), 0.0, varianttype=ua.VariantType.Double
    )
    setpoint = await mixer.add_variable(
        ua.NodeId("Mixer.Setpoint", idx), ua.QualifiedName("Setpoint", idx), 0.0, varianttype=ua.VariantType.Double
    )
    await setpoint.set_writable()
    running = await mixer.add_variable(
        ua.NodeId("Mixer.Running", idx), ua.QualifiedName("Running", idx), False, varianttype=ua.VariantType.Boolean
    )

    # Async, so it runs on the server's event loop (asyncua runs plain functions in a thread).
    @uamethod
    async def start(parent: ua.NodeId, rpm: float) -> ua.Variant:
        await setpoint.write_value(stamped(float(rpm), ua.VariantType.Double))
        await running.write_value(stamped(True, ua.VariantType.Boolean))
        return ua.Variant(True, ua.VariantType.Boolean)

    rpm_arg = ua.Argument()
    rpm_arg.Name = "rpm"
    rpm_arg.DataType = ua.NodeId(ua.ObjectIds.Double)
    rpm_arg.ValueRank = -1
    ok_arg = ua.Argument()
    ok_arg.Name = "ok"
    ok_arg.DataType = ua.NodeId(ua.ObjectIds.Boolean)
    ok_arg.ValueRank = -1
    await mixer.add_method(ua.NodeId("Mixer.Start", idx), ua.QualifiedName("Start", idx), start, [rpm_arg], [ok_arg])

    async def ramp() -> None:
        """Speed follows Setpoint at RAMP_RPM_PER_S; written only when it changes."""
        current = 0.0
        last = time.monotonic()
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            step = RAMP_RPM_PER_S * (now - last)
            last = now
            target = float(await setpoint.read_value())
            if current == target:
                continue
            current = min(target, current + step) if target > current else max(target, current - step)
            await speed.write_value(stamped(current, ua.VariantType.Double))

    async with server:
        ramping = asyncio.create_task(ramp())
        print(f"opc.tcp://127.0.0.1:{server.bserver.port}/closedloop/mixer", flush=True)
        loop = asyncio.get_running_loop()
        # Exit when the parent goes away (stdin closes), so a crashed test leaves no server behind.
        await loop.run_in_executor(None, sys.stdin.read)
        ramping.cancel()


if __name__ == "__main__":
    asyncio.run(main())
