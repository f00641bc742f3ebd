"""One MCP session through an installed closedloop, started as an MCP client starts it.

Usage: python session.py PLANT COMMAND [ARGS...]; the server is `COMMAND ARGS... serve PLANT`,
started by the official `mcp` client's stdio transport with its reduced environment plus an
`env` block (STATE_DIRECTORY, and the uv/pipx locations when set), as a client config has it.
It switches the plant's lamp on and requires `completed`, verified by the contact read back.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

PASSED = ("STATE_DIRECTORY", "UV_CACHE_DIR", "UV_TOOL_DIR", "UV_PYTHON_INSTALL_DIR", "UV_OFFLINE")


async def main(plant: str, command: str, args: list[str]) -> None:
    await session(command, [*args, "serve", plant])


async def session(command: str, args: list[str]) -> None:
    """The session, with the server started as `command args...` (the whole command line)."""
    env = {k: os.environ[k] for k in PASSED if k in os.environ}
    params = StdioServerParameters(command=command, args=args, env=env)
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=60) as session:
            init = await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert "lamp_switch" in tools, tools
            result = await session.call_tool("lamp_switch", {"on": True, "wait_s": 5})
            sc = result.structured_content
            assert sc is not None and sc["status"] == "completed", sc
            assert sc["verified"] is True, sc
            print(f"session: {init.server_info.name} {init.server_info.version}: lamp_switch "
                  f"{sc['status']}, verified")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3:])
