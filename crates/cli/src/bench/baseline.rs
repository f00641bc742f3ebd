//! The figures set against the bare rmcp echo server (`echo.rs`, serving the plant's tools beside
//! `echo`): `ping` and `tools/list` on both servers in the same rounds, the order of the two
//! swapped every round, so a busy moment of the machine weighs on both sides of the ratio.
//! Measured one server after the other, closedloop's ping read 0.45–1.38 × bare rmcp's in
//! three runs of one binary on one day.

use super::reads::{self, Probe, timed};
use super::rpc::Rpc;
use super::stats::{Latencies, Progress};
use super::{Row, ratio_row};
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::time::Instant;

/// closedloop's `ping` and `tools/list` beside bare rmcp's, closedloop's list beside its own
/// ping, and bare rmcp's echo tool beside its ping (what any tool call costs over a ping before
/// closedloop does anything: the floor of the reads' ratios).
pub(super) async fn rows(ours: &mut Rpc, bare: &mut Rpc, calls: usize) -> Result<Vec<Row>> {
    let label = "ping and tools/list, closedloop and bare rmcp in turn";
    let ([ping, list], [bare_ping, bare_list]) = ping_and_list(ours, bare, label, calls).await?;
    let echo = [reads::tool("echo", json!({"device": "relay0"}))];
    let label = "bare rmcp: ping and echo, interleaved";
    let (echo_ping, mut call) = reads::interleaved(bare, label, calls, &echo).await?;
    let call = call.pop().context("the echo's latencies")?;
    let listed = listed(ours).await?;
    Ok(vec![
        ratio_row("ping p50", &ping, &bare_ping, "bare rmcp"),
        ratio_row(
            "tools/list p50 (the same tools in both)",
            &list,
            &bare_list,
            "bare rmcp",
        ),
        ratio_row(
            "bare rmcp's echo tool p50 (vs its ping)",
            &call,
            &echo_ping,
            "bare rmcp ping",
        ),
        ratio_row(&listed, &list, &ping, "ping"),
    ])
}

/// closedloop's `ping` and `tools/list` beside the plain loop's (`floor.rs`), in the same
/// rounds: what the whole stack costs over a loop, and what serving the list adds to moving its
/// bytes.
pub(super) async fn floor_rows(ours: &mut Rpc, floor: &mut Rpc, calls: usize) -> Result<Vec<Row>> {
    let label = "ping and tools/list, closedloop and a plain loop in turn";
    let ([ping, list], [floor_ping, floor_list]) = ping_and_list(ours, floor, label, calls).await?;
    Ok(vec![
        ratio_row(
            "ping p50, vs a plain loop",
            &ping,
            &floor_ping,
            "plain loop",
        ),
        ratio_row(
            "tools/list p50, vs a plain loop writing the same list",
            &list,
            &floor_list,
            "plain loop",
        ),
    ])
}

/// `ping` and `tools/list` on `a` and `b` in the same rounds: each server's two latencies.
async fn ping_and_list(
    a: &mut Rpc,
    b: &mut Rpc,
    label: &str,
    calls: usize,
) -> Result<([Latencies; 2], [Latencies; 2])> {
    let probes = [("ping", Value::Null), reads::tools_list()];
    let (sa, sb) = alternating(a, b, label, calls, &probes).await?;
    let two = |figures: Vec<Latencies>| {
        <[Latencies; 2]>::try_from(figures).map_err(|_| anyhow::anyhow!("the rounds lost a figure"))
    };
    Ok((two(sa)?, two(sb)?))
}

/// The label of closedloop's `tools/list` row: how many tools, how many bytes of JSON.
async fn listed(rpc: &mut Rpc) -> Result<String> {
    let listed = rpc.call("tools/list", Value::Null).await?;
    let tools = listed["tools"].as_array().map_or(0, Vec::len);
    let kb = listed.to_string().len() as f64 / 1000.0;
    Ok(format!("tools/list p50, {tools} tools, {kb:.1} KB"))
}

/// `calls` rounds of every probe on `a`, then on `b` (`b` first every other round): each
/// server's latencies, a `Latencies` per probe.
async fn alternating(
    a: &mut Rpc,
    b: &mut Rpc,
    label: &str,
    calls: usize,
    probes: &[Probe],
) -> Result<(Vec<Latencies>, Vec<Latencies>)> {
    let mut bar = Progress::new(label, calls);
    let mut sa = vec![Vec::with_capacity(calls); probes.len()];
    let mut sb = sa.clone();
    let start = Instant::now();
    for i in 0..calls {
        let mut turn = [(&mut *a, &mut sa), (&mut *b, &mut sb)];
        if i % 2 == 1 {
            turn.reverse();
        }
        for (rpc, samples) in turn {
            for ((method, params), s) in probes.iter().zip(samples.iter_mut()) {
                s.push(timed(rpc.round_trip(method, params.clone())).await?);
            }
        }
        bar.set(i + 1);
    }
    bar.finish();
    let total = start.elapsed();
    let done = |s: Vec<Vec<_>>| s.into_iter().map(|s| Latencies::new(s, total)).collect();
    Ok((done(sa), done(sb)))
}
