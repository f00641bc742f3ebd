"""server.json, the MCP registry entry, held to the registry's server schema of 2025-12-11 and to
the packages scripts/package built.

Usage: python server_json.py SERVER_JSON VERSION WHEEL DEB. The schema's rules that apply to
this entry are checked one by one (the published schema cannot be fetched from this machine nor
copied into the repository); with CLOSEDLOOP_SERVER_SCHEMA naming a copy of the published file
and `jsonschema` importable, the entry is validated against it as well.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile

SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
TRANSPORTS = {"stdio", "streamable-http", "sse"}
RANGE = re.compile(r"^[\^~><=]|\.x$|\*|^latest$")


def fail(why: str) -> None:
    print(f"FAIL: server.json: {why}", file=sys.stderr)
    sys.exit(1)


def check_argument(arg: dict, where: str) -> None:
    kind = arg.get("type")
    if kind == "positional":
        if "value" not in arg and "valueHint" not in arg:
            fail(f"{where}: a positional argument needs value or valueHint")
    elif kind == "named":
        if not isinstance(arg.get("name"), str):
            fail(f"{where}: a named argument needs its name")
    else:
        fail(f"{where}: type is {kind!r}, not positional or named")
    fmt = arg.get("format", "string")
    if fmt not in {"string", "number", "boolean", "filepath"}:
        fail(f"{where}: format {fmt!r}")


def check_schema(entry: dict) -> None:
    """The rules of the 2025-12-11 ServerDetail this entry can break."""
    if entry.get("$schema") != SCHEMA_URL:
        fail(f"$schema is {entry.get('$schema')!r}, not {SCHEMA_URL}")
    for key in ("name", "description", "version"):
        if not isinstance(entry.get(key), str):
            fail(f"missing {key}")
    if not re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", entry["name"]) or not (
        3 <= len(entry["name"]) <= 200
    ):
        fail(f"name {entry['name']!r} is not reverse-DNS/name")
    if not 1 <= len(entry["description"]) <= 100:
        fail(f"description is {len(entry['description'])} characters; 1 to 100")
    if len(entry.get("title", "x")) > 100 or len(entry["version"]) > 255:
        fail("title over 100 or version over 255 characters")
    repo = entry.get("repository")
    if repo is not None and not {"url", "source"} <= repo.keys():
        fail("repository needs url and source")
    for i, pkg in enumerate(entry.get("packages", [])):
        where = f"packages[{i}]"
        for key in ("registryType", "identifier", "transport"):
            if key not in pkg:
                fail(f"{where}: missing {key}")
        if pkg["transport"].get("type") not in TRANSPORTS:
            fail(f"{where}: transport type {pkg['transport'].get('type')!r}")
        version = pkg.get("version")
        if version is not None and (not version or RANGE.search(version)):
            fail(f"{where}: version {version!r} is a range or empty")
        if "runtimeArguments" in pkg and "runtimeHint" not in pkg:
            fail(f"{where}: runtimeArguments without runtimeHint")
        for j, arg in enumerate(pkg.get("packageArguments", [])):
            check_argument(arg, f"{where}.packageArguments[{j}]")


def whl_description(wheel: str) -> str:
    """The long description (the README) the wheel's METADATA carries."""
    with zipfile.ZipFile(wheel) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        return whl.read(meta).decode()


def check_packages(entry: dict, version: str, wheel: str, deb: str) -> None:
    """Every package named is one scripts/package built, at this version."""
    if entry["version"] != version:
        fail(f"version {entry['version']} but Cargo.toml says {version}")
    pypi = [p for p in entry["packages"] if p["registryType"] == "pypi"]
    if len(pypi) != 1:
        fail("no pypi package named")
    with zipfile.ZipFile(wheel) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        fields = dict(
            line.split(": ", 1) for line in whl.read(meta).decode().splitlines() if ": " in line
        )
        scripts = [n for n in whl.namelist() if n.endswith(".data/scripts/closedloop")]
    if (fields.get("Name"), fields.get("Version")) != (pypi[0]["identifier"], pypi[0]["version"]):
        fail(f"the wheel is {fields.get('Name')} {fields.get('Version')}, not {pypi[0]['identifier']} {pypi[0]['version']}")
    if not scripts:
        fail("the wheel carries no closedloop binary")
    # The registry proves a PyPI package is this server's by this line in its description.
    if f"mcp-name: {entry['name']}" not in whl_description(wheel):
        fail(f"the wheel's description lacks the line mcp-name: {entry['name']}")
    args = [a.get("value", a.get("valueHint")) for a in pypi[0]["packageArguments"]]
    if args[0] != "serve":
        fail(f"the package is started with {args}, not serve PLANT")
    debian = entry["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]["debian"]
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], check=True, capture_output=True, text=True
    ).stdout.strip()
    if os.path.basename(deb) != f"{debian['package']}_{debian['version']}_{arch}.deb":
        fail(f"the .deb built is {os.path.basename(deb)}, server.json names {debian}")


def main() -> None:
    path, version, wheel, deb = sys.argv[1:5]
    with open(path, encoding="utf-8") as f:
        entry = json.load(f)
    check_schema(entry)
    check_packages(entry, version, wheel, deb)
    published = os.environ.get("CLOSEDLOOP_SERVER_SCHEMA")
    if published:
        import jsonschema  # only with a copy of the published schema at hand

        with open(published, encoding="utf-8") as f:
            jsonschema.validate(entry, json.load(f))
        print("server.json: valid against", published)
    print("server.json: the 2025-12-11 rules hold and it names the packages built")


if __name__ == "__main__":
    main()
