"""The README's client configuration for one install path, run as a client would run it.

Usage: python readme_client.py README.md LABEL PLANT [FROM=TO ...]

Reads the table of `README.md`'s "Use it from an MCP client" section (installed with |
"command" | "args"), takes the row whose first cell starts with LABEL, puts this test's paths in
place of the README's (each FROM=TO, and the example plant path for PLANT), and runs one MCP
session (session.py) with exactly that command and those arguments. A row that is missing, a
cell that is no JSON list, or a README path left in place fails loudly.
"""

from __future__ import annotations

import json
import sys

import anyio

from session import session

README_PLANT = "/home/you/plants/stepdrive.toml"


def row(readme: str, label: str) -> tuple[str, list[str]]:
    """The command and args of the row for `label`, as the README writes them."""
    section = readme.split("## Use it from an MCP client", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith(label):
            command = cells[1].strip("`")
            args = json.loads(cells[2].strip("`"))
            assert isinstance(args, list) and all(isinstance(a, str) for a in args), cells[2]
            return command, args
    raise SystemExit(f"readme_client: no row starting {label!r} in the README's client table")


def main() -> None:
    readme_path, label, plant, *pairs = sys.argv[1:]
    with open(readme_path, encoding="utf-8") as f:
        command, args = row(f.read(), label)
    swaps = [p.split("=", 1) for p in pairs] + [[README_PLANT, plant]]
    for old, new in swaps:
        command = command.replace(old, new)
        args = [a.replace(old, new) for a in args]
    left = [x for x in [command, *args] if "/home/you" in x]
    assert not left, f"README paths left in place for {label!r}: {left}"
    print(f"readme_client: {label}: {command} {' '.join(args)}")
    anyio.run(session, command, args)


if __name__ == "__main__":
    main()
