"""`/metrics` scraped and parsed by `prometheus_client`'s own exposition parser (code nobody here
wrote), after commands driven by the official `mcp` client: the counts must be exactly the
commands that ran, with the status and code each one ended with, and the devices' liveness must
be what the simulated plant shows (the fan's supply is off: it never answers).

Over HTTP the metrics are at /metrics of the MCP address; a stdio server serves them with
`--metrics ADDR`.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.anyio


def scrape(url: str, host: str | None = None) -> tuple[int, str, str]:
    """GET url: status, Content-Type and body (an HTTP error's too)."""
    req = urllib.request.Request(url)
    if host is not None:
        req.add_header("Host", host)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the exposition, by name and labels, as prometheus_client parses it."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed, name: str, **labels: str) -> float | None:
    return parsed.get((name, frozenset(labels.items())))


async def run_commands(session: ClientSession) -> None:
    """One completed lamp switch, one slide move that stalls (failed MOTOR_STALL), one call
    refused before anything moves (rejected INVALID_PARAMS)."""
    lamp = await session.call_tool("lamp_switch", {"on": True, "wait_s": 5})
    assert lamp.structured_content["status"] == "completed", lamp
    slide = await session.call_tool("slide_move_to", {"target_mm": 150, "wait_s": 8})
    assert slide.structured_content["status"] == "failed", slide
    assert slide.structured_content["error_code"] == "MOTOR_STALL", slide
    bad = await session.call_tool("slide_move_to", {"target_mm": 999})
    assert bad.structured_content["status"] == "rejected", bad
    assert bad.structured_content["error_code"] == "INVALID_PARAMS", bad


def check_counts(parsed) -> None:
    commands = "closedloop_commands_total"
    assert value(parsed, commands, device="lamp", action="switch", status="completed", code="") == 1
    assert value(parsed, commands, device="slide", action="move_to", status="failed", code="MOTOR_STALL") == 1
    assert value(parsed, commands, device="slide", action="move_to", status="rejected", code="INVALID_PARAMS") == 1
    # Acknowledged commands only: the lamp and the stalled move; the rejection never reached it.
    truth = "closedloop_command_time_to_truth_seconds_count"
    assert value(parsed, truth, device="lamp", action="switch") == 1
    assert value(parsed, truth, device="slide", action="move_to") == 1
    calls = "closedloop_tool_calls_total"
    assert value(parsed, calls, tool="lamp_switch", outcome="ok") == 1
    assert value(parsed, calls, tool="slide_move_to", outcome="error") == 2
    assert value(parsed, "closedloop_tool_call_duration_seconds_count", tool="slide_move_to") == 2


def check_internals(parsed) -> None:
    """Poll cycles, journal writes and their queue: recorded, and plausible."""
    assert value(parsed, "closedloop_device_poll_duration_seconds_count") > 10
    assert 0 <= value(parsed, "closedloop_device_last_poll_seconds", device="lamp") < 1
    # The lamp answers at once: no tick finds its previous cycle still running.
    assert value(parsed, "closedloop_device_polls_missed_total", device="lamp") == 0
    # Each command above wrote its acceptance and its ending at least.
    assert value(parsed, "closedloop_journal_write_duration_seconds_count") >= 6
    assert value(parsed, "closedloop_journal_batch_writes_count") >= 1
    assert value(parsed, "closedloop_journal_queue_depth") >= 0


async def wait_fan_offline(scrape_url: str) -> dict:
    """Scrapes until the fan (no supply) has been declared offline, bounded."""
    with anyio.fail_after(20):
        while True:
            status, ctype, body = scrape(scrape_url)
            assert status == 200, body
            assert ctype.startswith("text/plain; version=0.0.4"), ctype
            parsed = samples(body)
            if value(parsed, "closedloop_device_up", device="fan") == 0 and value(
                parsed, "closedloop_device_up", device="lamp"
            ) == 1:
                return parsed
            await anyio.sleep(0.2)


async def test_metrics_over_http_count_what_ran(http_server, http_session) -> None:
    metrics_url = http_server.url.removesuffix("/mcp") + "/metrics"
    async with http_session() as session:
        await run_commands(session)
    parsed = await wait_fan_offline(metrics_url)
    check_counts(parsed)
    assert value(parsed, "closedloop_device_last_seen_age_seconds", device="lamp") < 5
    check_internals(parsed)
    assert value(parsed, "closedloop_http_responses_total", status="200") >= 1
    assert value(parsed, "closedloop_http_connections") >= 0
    # The same guard as the MCP endpoint: a rebinding Host is refused, and counted.
    status, _, _ = scrape(metrics_url, host="evil.example")
    assert status == 403
    _, _, body = scrape(metrics_url)
    assert value(samples(body), "closedloop_http_responses_total", status="403") >= 1


async def test_metrics_beside_stdio(closedloop_bin: Path, plant: Path) -> None:
    log_path = plant.parent / "server.log"
    params = StdioServerParameters(
        command=str(closedloop_bin),
        args=["serve", str(plant), "--metrics", "127.0.0.1:0"],
        cwd=str(plant.parent),
    )
    with open(log_path, "a", encoding="utf-8") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30) as session:
                await session.initialize()
                deadline = time.monotonic() + 10
                while (m := re.search(r"closedloop: metrics on (http://\S+)", log_path.read_text())) is None:
                    assert time.monotonic() < deadline, log_path.read_text()
                    await anyio.sleep(0.05)
                await run_commands(session)
                parsed = await wait_fan_offline(m.group(1))
                check_counts(parsed)
