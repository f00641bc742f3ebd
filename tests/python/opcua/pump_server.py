"""A pump served over OPC UA by asyncua, a stack no one here wrote, for closedloop-opcua's
interop test (crates/drivers/opcua/tests/python_interop.rs).

Address space (namespace "urn:closedloop:test:pump", index 2):
  ns=2;s=Pump1             object
  ns=2;s=Pump1.Speed       Double, writable (rpm)
  ns=2;s=Pump1.SpeedLimit  Int16, writable: a client must write an Int16, as the node declares
  ns=2;s=Pump1.Running     Boolean, read-only: follows Start()/Stop() after --delay-ms
  ns=2;s=Pump1.Start()     method, no arguments; Running goes true after the delay
  ns=2;s=Pump1.Stop()      method, no arguments; Running goes false after the delay
  ns=2;s=Pump1.SetLimit(limit: Int16) -> previous: Int16

With --login USER:PASSWORD the server takes that user name and password and nothing else: no
anonymous sessions, any other user or password is refused with Bad_UserAccessDenied.

With --secure CERT.der:KEY.pem it offers only Basic256Sha256 with signing and encryption, under
that certificate: the user name and password then cross an encrypted channel.

Listens on a free loopback port and prints its endpoint URL as the only line on stdout once it
accepts connections; logs go to stderr. Runs until killed or until stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from asyncua import Server, ua
from asyncua.common.methods import uamethod
from asyncua.crypto.permission_rules import User, UserRole
from asyncua.server.user_managers import UserManager

NAMESPACE = "urn:closedloop:test:pump"


class OneUser(UserManager):
    """Lets in exactly one user name with its password."""

    def __init__(self, login: str) -> None:
        self.name, _, self.password = login.partition(":")

    def get_user(self, iserver, username=None, password=None, certificate=None):  # type: ignore[no-untyped-def]
        if username == self.name and password == self.password:
            return User(role=UserRole.User, name=username)
        return None


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay-ms", type=int, default=200, help="Running follows Start/Stop after this long")
    parser.add_argument("--login", help="USER:PASSWORD: require this user name and password")
    parser.add_argument("--secure", help="CERT.der:KEY.pem: offer Basic256Sha256 SignAndEncrypt only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    server = Server(user_manager=OneUser(args.login) if args.login else None)
    await server.init()
    if args.login:
        server.set_identity_tokens([ua.UserNameIdentityToken])
    server.set_endpoint("opc.tcp://127.0.0.1:0/closedloop/pump")
    server.set_server_name("closedloop test pump (asyncua)")
    if args.secure:
        cert, _, key = args.secure.partition(":")
        await server.load_certificate(cert)
        await server.load_private_key(key)
        server.set_security_policy([ua.SecurityPolicyType.Basic256Sha256_SignAndEncrypt])
    else:
        server.set_security_policy([ua.SecurityPolicyType.NoSecurity])
    idx = await server.register_namespace(NAMESPACE)

    pump = await server.nodes.objects.add_object(ua.NodeId("Pump1", idx), ua.QualifiedName("Pump1", idx))
    speed = await pump.add_variable(
        ua.NodeId("Pump1.Speed", idx), ua.QualifiedName("Speed", idx), 0.0, varianttype=ua.VariantType.Double
    )
    await speed.set_writable()
    limit = await pump.add_variable(
        ua.NodeId("Pump1.SpeedLimit", idx), ua.QualifiedName("SpeedLimit", idx), 1500, varianttype=ua.VariantType.Int16
    )
    await limit.set_writable()
    running = await pump.add_variable(
        ua.NodeId("Pump1.Running", idx), ua.QualifiedName("Running", idx), False, varianttype=ua.VariantType.Boolean
    )

    delay = args.delay_ms / 1000.0
    pending: set[asyncio.Task[None]] = set()

    def follow(state: bool) -> None:
        async def later() -> None:
            await asyncio.sleep(delay)
            await running.write_value(state, ua.VariantType.Boolean)

        task = asyncio.create_task(later())
        pending.add(task)
        task.add_done_callback(pending.discard)

    # Async, so they run on the server's event loop (asyncua runs plain functions in a thread).
    @uamethod
    async def start(parent: ua.NodeId) -> None:
        follow(True)

    @uamethod
    async def stop(parent: ua.NodeId) -> None:
        follow(False)

    @uamethod
    async def set_limit(parent: ua.NodeId, new: int) -> ua.Variant:
        previous = await limit.read_value()
        await limit.write_value(ua.Variant(new, ua.VariantType.Int16))
        return ua.Variant(previous, ua.VariantType.Int16)

    await pump.add_method(ua.NodeId("Pump1.Start", idx), ua.QualifiedName("Start", idx), start, [], [])
    await pump.add_method(ua.NodeId("Pump1.Stop", idx), ua.QualifiedName("Stop", idx), stop, [], [])
    limit_arg = ua.Argument()
    limit_arg.Name = "limit"
    limit_arg.DataType = ua.NodeId(ua.ObjectIds.Int16)
    limit_arg.ValueRank = -1
    previous_arg = ua.Argument()
    previous_arg.Name = "previous"
    previous_arg.DataType = ua.NodeId(ua.ObjectIds.Int16)
    previous_arg.ValueRank = -1
    await pump.add_method(
        ua.NodeId("Pump1.SetLimit", idx), ua.QualifiedName("SetLimit", idx), set_limit, [limit_arg], [previous_arg]
    )

    async with server:
        print(f"opc.tcp://127.0.0.1:{server.bserver.port}/closedloop/pump", flush=True)
        loop = asyncio.get_running_loop()
        # Exit when the parent goes away (stdin closes), so a crashed test leaves no server behind.
        await loop.run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
