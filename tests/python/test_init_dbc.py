"""`closedloop init --dbc` held to cantools: a plant generated from examples/can-workshop.dbc is
served against the slcan adapter emulator (slcan_adapter.py over a socat pty pair), and the
frame its generated slide action writes is decoded by cantools to the parameters given.

A missing prerequisite (cantools, pyserial, socat) fails the test; nothing here skips.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from support import PtyPair, act, call, outcome, require, serve, stop

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ADAPTER = HERE / "slcan_adapter.py"


async def test_generated_action_frame_decodes_to_its_parameters(
    closedloop_bin: Path,
    tmp_path: Path,
    pty_pair: PtyPair,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    cantools = require("cantools")
    require("serial")
    dbc = tmp_path / "can-workshop.dbc"
    dbc.write_text((REPO / "examples" / "can-workshop.dbc").read_text(encoding="utf-8"), encoding="utf-8")
    plant = tmp_path / "plant.toml"
    made = subprocess.run(
        [str(closedloop_bin), "init", "--dbc", str(dbc), "--node", "Slide", "--out", str(plant)],
        capture_output=True, text=True, check=False,
    )
    assert made.returncode == 0, made.stderr
    assert 'dbc = "can-workshop.dbc"' in plant.read_text(encoding="utf-8")

    record = tmp_path / "rx.jsonl"
    log = tmp_path / "adapter.log"
    with open(log, "w", encoding="utf-8") as err:
        adapter = subprocess.Popen(
            [sys.executable, str(ADAPTER), "--port", pty_pair.b, "--dbc", str(dbc),
             "--send", "SlideStatus:PositionMm=12.5,Moving=0,Fault=0@20", "--record", str(record)],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )
    try:
        assert adapter.stdout is not None
        ready = adapter.stdout.readline()
        assert '"ready"' in ready, f"slcan_adapter.py did not start: {ready} {log.read_text()}"
        monkeypatch.setenv("CAN_INTERFACE", f"slcan:{pty_pair.a}")
        async with serve(closedloop_bin, plant, request) as session:
            with anyio.fail_after(15):
                while (await call(session, "get_device_state", {"device": "slide"}))["liveness"] != "online":
                    await anyio.sleep(0.05)
            state = await call(session, "get_device_state", {"device": "slide"})
            assert math.isclose(state["signals"]["position_mm"]["value"], 12.5), state
            args = {"target_mm": 123.45, "start": True, "stop": False, "reset": True}
            sc = await act(session, "slide_set_slide", args)
            assert outcome(sc) == ("sent", None), sc
            with anyio.fail_after(10):
                while not (record.exists() and record.read_text().strip()):
                    await anyio.sleep(0.05)
        rx = json.loads(record.read_text().splitlines()[0])
        db = cantools.database.load_file(str(dbc))
        values = db.get_message_by_name("SlideCmd").decode(bytes.fromhex(rx["hex"]), decode_choices=False)
        assert math.isclose(values["TargetMm"], 123.45, abs_tol=1e-9), rx
        assert (values["Start"], values["Stop"], values["Reset"]) == (1, 0, 1), rx
    finally:
        stop(adapter)
        request.node.add_report_section("teardown", "slcan_adapter.py stderr", log.read_text()[-20000:])
