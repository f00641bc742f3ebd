"""closedloop's DBC decoding and encoding (crates/drivers/can) held to cantools, a codec no one
here wrote, on cantools' own DBC test files; and the slcan path end to end against an emulated
adapter (slcan_adapter.py) over a socat pty pair.

The cantools source distribution is fetched once, pinned, into a cache outside the clone
($CLOSEDLOOP_CANTOOLS_CACHE, default /var/tmp/closedloop-cantools); its tests/files/dbc/ are the
inputs. For every message of every file, FRAMES_PER_MESSAGE seeded random frames (and all-zero,
all-one frames; for multiplexed messages half of them carry a defined multiplexer value) are
decoded by cantools and by closedloop's `dbc_decode` example, and every signal value is compared
(exactly for integers, to 1e-12 relative for scaled values). The values cantools decoded are then
encoded by closedloop: the bytes must equal cantools' own encoding, and cantools must decode them
back to the same values. Out-of-range, NaN and missing values must be refused naming message and
signal.

Files and messages closedloop refuses are listed in dbc_skip.txt (`file[:message] — reason`); the
list must match the refusals exactly, both ways. A missing prerequisite (cantools, pyserial,
socat, cargo) fails the test; nothing here skips.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import PtyPair, require

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SKIP_LIST = HERE / "dbc_skip.txt"
SLCAN_ADAPTER = HERE / "slcan_adapter.py"

CANTOOLS_VERSION = "45.1.0"
CACHE = Path(os.environ.get("CLOSEDLOOP_CANTOOLS_CACHE", "/var/tmp/closedloop-cantools"))
FRAMES_PER_MESSAGE = 200
SEED = 20261129

# Files cantools itself refuses to load even with strict=False, so there is nothing to compare
# closedloop with. The test checks that cantools still refuses each one.
CANTOOLS_CANNOT_LOAD = {
    "incorrect-sig_valtype.dbc": "a SIG_VALTYPE_ entry names a message the file does not have",
    "incorrect-val.dbc": "a VAL_ entry names a message the file does not have",
    "issue_199.dbc": "standard ids wider than 11 bits",
    "issue_199_extended.dbc": "an extended id wider than 29 bits",
}


# ---------------------------------------------------------------------------------------------
# Inputs: cantools' DBC files and closedloop's example binaries


@pytest.fixture(scope="module")
def dbc_dir() -> Path:
    """cantools' tests/files/dbc/ from the pinned sdist, downloaded and unpacked once."""
    root = CACHE / f"cantools-{CANTOOLS_VERSION}"
    files = root / "tests" / "files" / "dbc"
    if files.is_dir():
        return files
    CACHE.mkdir(parents=True, exist_ok=True)
    sdist = CACHE / f"cantools-{CANTOOLS_VERSION}.tar.gz"
    if not sdist.is_file():
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
             "-q", f"cantools=={CANTOOLS_VERSION}", "--no-binary", ":all:", "--no-deps",
             "-d", str(CACHE)],
            capture_output=True, text=True,
        )
        if proc.returncode != 0 or not sdist.is_file():
            pytest.fail(f"pip download cantools=={CANTOOLS_VERSION} failed:\n{proc.stderr}", pytrace=False)
    prefix = f"cantools-{CANTOOLS_VERSION}/tests/files/dbc/"
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            tar.extractall(tmp, members=members, filter="data")
        dest = files
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(Path(tmp) / prefix, dest)
    return files


@dataclass
class Examples:
    dbc_decode: Path
    slcan_monitor: Path


@pytest.fixture(scope="module")
def examples() -> Examples:
    """closedloop-can's example binaries, built with cargo into $CARGO_TARGET_DIR."""
    if shutil.which("cargo") is None:
        pytest.fail("cargo is not on PATH; the test builds closedloop-can's examples", pytrace=False)
    target = Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/closedloop-target"))
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    proc = subprocess.run(
        ["cargo", "build", "--locked", "-q", "-p", "closedloop-can",
         "--example", "dbc_decode", "--example", "slcan_monitor"],
        cwd=REPO, env=env, capture_output=True, text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"cargo build of closedloop-can's examples failed:\n{proc.stderr}", pytrace=False)
    return Examples(target / "debug" / "examples" / "dbc_decode", target / "debug" / "examples" / "slcan_monitor")


def dbc_files(dbc_dir: Path) -> list[Path]:
    return sorted(p for p in dbc_dir.iterdir() if p.suffix.lower() == ".dbc")


def run_closedloop(binary: Path, dbc: Path, requests: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Runs `dbc_decode FILE` with the requests on stdin: (file description, answers)."""
    proc = subprocess.run(
        [str(binary), str(dbc)], input="".join(r + "\n" for r in requests),
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"dbc_decode {dbc.name} exited {proc.returncode}: {proc.stderr}"
    lines = proc.stdout.splitlines()
    head = json.loads(lines[0])
    answers = [json.loads(line) for line in lines[1:]]
    if "file_error" not in head:
        assert len(answers) == len(requests), f"{dbc.name}: {len(answers)} answers to {len(requests)} requests"
    return head, answers


# ---------------------------------------------------------------------------------------------
# Frames and values


def set_field(data: bytearray, sig: Any, raw: int) -> None:
    """Writes a raw value into a signal's bits the way the DBC convention lays them out (used
    only to steer a multiplexer to a defined value; both decoders then read the same bytes)."""
    n = len(data) * 8
    mask = (1 << sig.length) - 1
    raw &= mask
    if sig.byte_order == "little_endian":
        value = int.from_bytes(data, "little")
        value = (value & ~(mask << sig.start)) | (raw << sig.start)
        data[:] = value.to_bytes(len(data), "little")
    else:
        msb = 8 * (sig.start // 8) + 7 - sig.start % 8
        shift = n - msb - sig.length
        value = int.from_bytes(data, "big")
        value = (value & ~(mask << shift)) | (raw << shift)
        data[:] = value.to_bytes(len(data), "big")


def frames_for(message: Any, rng: random.Random) -> list[bytes]:
    length = message.length
    frames = [bytes(length), bytes([0xFF] * length)]
    switches = [s for s in message.signals if s.is_multiplexer]
    mux_ids = sorted({i for s in message.signals for i in (s.multiplexer_ids or [])})
    while len(frames) < FRAMES_PER_MESSAGE + 2:
        data = bytearray(rng.getrandbits(8) for _ in range(length))
        if switches and mux_ids and len(frames) % 2 == 0:
            set_field(data, switches[0], rng.choice(mux_ids))
        frames.append(bytes(data))
    return frames


def top_level(message: Any, data: bytes) -> dict[str, Any]:
    """cantools' decode of the signals outside any multiplexed group (what a frame with an
    undefined multiplexer value still carries)."""
    from cantools.database.utils import decode_data

    codecs = message._codecs  # pinned cantools version: the codec tree of the message
    return decode_data(data, message.length, codecs["signals"], codecs["formats"], False, True, False, True)


def same(expected: Any, got: Any) -> bool:
    if got is None:
        return False
    if isinstance(expected, int):
        if abs(expected) <= 2**53:
            return got == float(expected)
        return math.isclose(got, float(expected), rel_tol=2**-52)
    return math.isclose(got, expected, rel_tol=1e-12, abs_tol=1e-12)


def bits(v: float) -> str:
    return struct.pack(">d", float(v)).hex()


def encode_request(name: str, values: dict[str, Any]) -> str:
    return f"encode {name} " + ",".join(f"{k}={bits(v)}" for k, v in values.items())


# ---------------------------------------------------------------------------------------------
# The comparison, run once per module


@dataclass
class Report:
    files: int = 0
    files_compared: int = 0
    messages_compared: int = 0
    frames_decoded: int = 0
    values_compared: int = 0
    values_exact: int = 0
    frames_encoded: int = 0
    encode_skipped_wide: int = 0
    refusals_checked: int = 0
    refused: dict[str, str] = field(default_factory=dict)  # skip-list key → closedloop's reason
    failures: dict[str, list[str]] = field(default_factory=dict)

    def fail(self, kind: str, text: str) -> None:
        self.failures.setdefault(kind, []).append(text)


def layout_mismatch(cm: Any, ours: dict[str, Any]) -> str | None:
    """Compares closedloop's view of a message with cantools'."""
    got = (ours["id"], ours["extended"], ours["size"], ours["fd"])
    # closedloop also counts a payload over 8 bytes as CAN FD (no classic frame can carry it).
    want = (cm.frame_id, cm.is_extended_frame, cm.length, cm.is_fd or cm.length > 8)
    if got != want:
        return f"(id, extended, size, fd) = {got}, cantools {want}"
    theirs = {s.name: s for s in cm.signals}
    mine = {s["name"]: s for s in ours["signals"]}
    if set(theirs) != set(mine):
        return f"signals {sorted(mine)}, cantools {sorted(theirs)}"
    for name, s in theirs.items():
        m = mine[name]
        mux = "switch" if s.is_multiplexer else (s.multiplexer_ids[0] if s.multiplexer_ids else None)
        want = (s.start, s.length, s.byte_order == "big_endian", s.is_signed, mux)
        got = (m["start"], m["length"], m["big_endian"], m["signed"], m["mux"])
        if got != want:
            return f"signal {name}: (start, length, big endian, signed, mux) = {got}, cantools {want}"
        if not (same(s.scale, m["factor"]) and same(s.offset, m["offset"])):
            return f"signal {name}: factor/offset {m['factor']}/{m['offset']}, cantools {s.scale}/{s.offset}"
    return None


def compare_file(path: Path, binary: Path, report: Report) -> None:
    cantools = require("cantools")
    db = None
    try:
        db = cantools.database.load_file(str(path), database_format="dbc", strict=True)
    except Exception:
        try:
            db = cantools.database.load_file(str(path), database_format="dbc", strict=False)
        except Exception as exc:
            if path.name not in CANTOOLS_CANNOT_LOAD:
                report.fail("cantools", f"{path.name}: cantools cannot load it ({exc}); not compared")
    if db is not None and path.name in CANTOOLS_CANNOT_LOAD:
        report.fail("cantools", f"{path.name}: listed as one cantools cannot load, but it loads now")

    # Pass 1: closedloop's view of the file, and decodes of the random frames.
    plan: list[tuple[Any, bytes]] = []
    if db is not None:
        for cm in db.messages:
            rng = random.Random(f"{SEED}:{path.name}:{cm.name}")
            plan += [(cm, data) for data in frames_for(cm, rng)]
    head, answers = run_closedloop(binary, path, [f"decode {cm.name} {data.hex()}" for cm, data in plan])
    report.files += 1
    if "file_error" in head:
        report.refused[path.name] = head["file_error"]
        return
    ours = {m["name"]: m for m in head["messages"]}
    refused = {r["message"]: r["error"] for r in head["refused"]}
    if not ours and refused:
        report.refused[path.name] = "; ".join(refused.values())
    else:
        for name, why in refused.items():
            report.refused[f"{path.name}:{name}"] = why
    if db is None:
        return
    report.files_compared += 1

    for cm in db.messages:
        if cm.name not in ours and cm.name not in refused:
            report.fail("layout", f"{path.name}:{cm.name}: closedloop neither loaded nor refused it")
        elif cm.name in ours and (why := layout_mismatch(cm, ours[cm.name])):
            report.fail("layout", f"{path.name}:{cm.name}: {why}")
    report.messages_compared += sum(1 for cm in db.messages if cm.name in ours)

    # Decode agreement; collect what to encode.
    encodes: list[tuple[Any, dict[str, Any]]] = []
    for (cm, data), answer in zip(plan, answers):
        if cm.name not in ours:
            continue
        report.frames_decoded += 1
        full = True
        try:
            want = cm.decode(data, decode_choices=False, scaling=True)
        except cantools.database.errors.DecodeError:
            want = top_level(cm, data)
            full = False
        got = answer.get("values")
        where = f"{path.name}:{cm.name} {data.hex()}"
        if got is None:
            report.fail("decode", f"{where}: closedloop answered {answer}")
            continue
        if set(got) != set(want):
            report.fail("decode", f"{where}: signals {sorted(got)}, cantools {sorted(want)}")
            continue
        for name, value in want.items():
            report.values_compared += 1
            if got[name] == value:
                report.values_exact += 1
            elif not same(value, got[name]):
                report.fail("decode", f"{where}: {name} = {got[name]!r}, cantools {value!r}")
        if full:
            if any(isinstance(v, int) and abs(v) > 2**53 for v in want.values()):
                report.encode_skipped_wide += 1  # no f64 holds the value: CEL's numbers are doubles
            else:
                encodes.append((cm, want))

    # Pass 2: encode the values cantools decoded; plus refusals of impossible values.
    requests = [encode_request(cm.name, values) for cm, values in encodes]
    refusal_checks: list[tuple[str, str, str]] = []  # (request, message, signal)
    checked: set[str] = set()
    for cm, values in encodes:
        if cm.name in checked:
            continue
        checked.add(cm.name)
        sigs = {s["name"]: s for s in ours[cm.name]["signals"]}
        target = next((n for n in values if sigs[n]["mux"] != "switch" and sigs[n]["length"] < 53), None)
        if target is None:
            continue
        lo, hi = sigs[target]["range"]
        step = abs(sigs[target]["factor"]) or 1.0
        for bad in (hi + step, lo - step, float("nan")):
            refusal_checks.append((encode_request(cm.name, {**values, target: bad}), cm.name, target))
        missing = {k: v for k, v in values.items() if k != target}
        refusal_checks.append((encode_request(cm.name, missing), cm.name, target))
    _, answers = run_closedloop(binary, path, requests + [r for r, _, _ in refusal_checks])
    for (cm, values), answer in zip(encodes, answers):
        where = f"{path.name}:{cm.name} {values}"
        if "hex" not in answer:
            report.fail("encode", f"{where}: closedloop refused: {answer.get('error')}")
            continue
        report.frames_encoded += 1
        ours_bytes = bytes.fromhex(answer["hex"])
        theirs = cm.encode(values, scaling=True, padding=False, strict=False)
        if ours_bytes != theirs:
            report.fail("encode", f"{where}: closedloop {ours_bytes.hex()}, cantools {theirs.hex()}")
        back = cm.decode(ours_bytes, decode_choices=False)
        for name, value in values.items():
            if not same(value, float(back[name])) and not (value == back[name]):
                report.fail("encode", f"{where}: {name} decodes back as {back[name]!r}")
    for (_, message, sig), answer in zip(refusal_checks, answers[len(requests):]):
        report.refusals_checked += 1
        error = answer.get("error", "")
        if "hex" in answer or message not in error or sig not in error:
            report.fail("refusal", f"{path.name}:{message}.{sig}: expected a refusal naming both, got {answer}")


@pytest.fixture(scope="module")
def report(dbc_dir: Path, examples: Examples) -> Report:
    require("cantools")
    rep = Report()
    for path in dbc_files(dbc_dir):
        compare_file(path, examples.dbc_decode, rep)
    print(
        f"\ncantools {CANTOOLS_VERSION} comparison: {rep.files} files ({rep.files_compared} loadable by cantools), "
        f"{rep.messages_compared} messages, {rep.frames_decoded} frames decoded, "
        f"{rep.values_compared} values ({rep.values_exact} bit-identical), {rep.frames_encoded} frames encoded "
        f"({rep.encode_skipped_wide} with values wider than 2^53 not encoded), "
        f"{rep.refusals_checked} refusals, {len(rep.refused)} skip-list items"
    )
    return rep


def show(items: list[str], limit: int = 25) -> str:
    more = f"\n... and {len(items) - limit} more" if len(items) > limit else ""
    return "\n".join(items[:limit]) + more


def test_layouts_agree_with_cantools(report: Report) -> None:
    assert report.files_compared >= 60 and report.messages_compared >= 300, report
    problems = report.failures.get("layout", []) + report.failures.get("cantools", [])
    assert not problems, show(problems)


def test_decoding_agrees_with_cantools(report: Report) -> None:
    assert report.frames_decoded >= 300 * FRAMES_PER_MESSAGE, report
    assert not report.failures.get("decode"), show(report.failures["decode"])


def test_encoding_agrees_with_cantools(report: Report) -> None:
    assert report.frames_encoded >= 100 * FRAMES_PER_MESSAGE, report
    assert not report.failures.get("encode"), show(report.failures["encode"])


def test_impossible_values_are_refused_naming_message_and_signal(report: Report) -> None:
    assert report.refusals_checked >= 300, report
    assert not report.failures.get("refusal"), show(report.failures["refusal"])


def read_skip_list() -> dict[str, str]:
    entries: dict[str, str] = {}
    for n, line in enumerate(SKIP_LIST.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, reason = line.partition(" — ")
        assert sep and reason.strip(), f"{SKIP_LIST.name}:{n}: expected `file[:message] — reason`"
        assert key not in entries, f"{SKIP_LIST.name}:{n}: {key} listed twice"
        entries[key.strip()] = reason.strip()
    return entries


def test_skip_list_matches_what_closedloop_refuses(report: Report) -> None:
    listed = read_skip_list()
    unlisted = [f"{k} — {why}" for k, why in sorted(report.refused.items()) if k not in listed]
    stale = [k for k in sorted(listed) if k not in report.refused]
    assert not unlisted, f"closedloop refuses these, but {SKIP_LIST.name} does not list them:\n" + show(unlisted, 100)
    assert not stale, f"{SKIP_LIST.name} lists these, but closedloop no longer refuses them:\n" + show(stale, 100)


# ---------------------------------------------------------------------------------------------
# slcan end to end: slcan_adapter.py (pyserial + cantools) ↔ closedloop's slcan transport


def test_slcan_adapter_and_closedloop_exchange_dbc_frames(
    pty_pair: PtyPair, dbc_dir: Path, examples: Examples, tmp_path: Path
) -> None:
    require("serial")
    cantools = require("cantools")
    dbc = dbc_dir / "motohawk.dbc"
    record = tmp_path / "rx.jsonl"
    adapter = subprocess.Popen(
        [sys.executable, str(SLCAN_ADAPTER), "--port", pty_pair.b, "--dbc", str(dbc),
         "--send", "ExampleMessage:Temperature=251.5,AverageRadius=1.2,Enable=1@20",
         "--record", str(record), "--timestamps", "--noise"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert adapter.stdout is not None
        ready = adapter.stdout.readline()
        assert '"ready"' in ready, f"slcan_adapter.py did not start: {ready}{adapter.stderr.read() if adapter.stderr else ''}"
        mon = subprocess.run(
            [str(examples.slcan_monitor), "--port", pty_pair.a, "--dbc", str(dbc), "--bitrate", "500000",
             "--send", "ExampleMessage:Temperature=249.9,AverageRadius=0.3,Enable=0", "--frames", "6",
             "--timeout-s", "20"],
            capture_output=True, text=True, timeout=60,
        )
        assert mon.returncode == 0, f"slcan_monitor failed: {mon.stderr}"
    finally:
        adapter.send_signal(signal.SIGTERM)
        try:
            out, err = adapter.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            adapter.kill()
            out, err = adapter.communicate()
    assert adapter.returncode == 0, f"slcan_adapter.py exited {adapter.returncode}: {err}"

    lines = [json.loads(line) for line in mon.stdout.splitlines()]
    frames = [line for line in lines if "frame" in line]
    assert len(frames) == 6
    for f in frames:
        assert f["message"] == "ExampleMessage" and f["frame"]["id"] == 496
        v = f["values"]
        assert math.isclose(v["Temperature"], 251.5) and math.isclose(v["AverageRadius"], 1.2) and v["Enable"] == 1.0
    stats = lines[-1]["stats"]
    assert stats["sent"] == 1 and stats["received"] >= 6
    assert stats["line_errors"] >= 1, "the adapter's --noise lines must be counted"

    events = [json.loads(line) for line in out.splitlines()]
    assert {"event": "bitrate", "bitrate": 500000} in events
    rx = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(rx) == 1, rx
    db = cantools.database.load_file(str(dbc))
    values = db.get_message_by_name("ExampleMessage").decode(bytes.fromhex(rx[0]["hex"]), decode_choices=False)
    assert math.isclose(values["Temperature"], 249.9) and math.isclose(values["AverageRadius"], 0.3)
    assert values["Enable"] == 0
    assert rx[0]["decoded"]["message"] == "ExampleMessage"
