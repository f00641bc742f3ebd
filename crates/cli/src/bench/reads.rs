//! The reads against `ping` on the same pipe: each round calls `ping`, then every read once
//! (`tools/list` has rounds of its own), so each figure and its baseline are taken under the
//! same conditions.
//! Measured one phase after the other, a ping p50 taken while the machine was quiet was set
//! against reads taken while it was busy (or the other way round), and the ratio moved by a
//! third between two runs of the same binary.

use super::rpc::Rpc;
use super::stats::{Latencies, Progress};
use super::{Row, ratio_row};
use anyhow::Result;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A request timed in the rounds: its method and params.
pub(super) type Probe = (&'static str, Value);

/// `tools/list`.
pub(super) fn tools_list() -> Probe {
    ("tools/list", Value::Null)
}

/// A `tools/call` of `tool` with `arguments`.
pub(super) fn tool(tool: &str, arguments: Value) -> Probe {
    ("tools/call", json!({"name": tool, "arguments": arguments}))
}

/// The reads measured: the row's label and the call.
fn reads(device: &str, finished: Option<&str>, page: usize) -> Vec<(String, Probe)> {
    let mut reads = vec![
        (
            "get_device_state p50".to_string(),
            tool("get_device_state", json!({"device": device})),
        ),
        (
            format!("list_devices p50, one page of {page}"),
            tool("list_devices", json!({})),
        ),
    ];
    if let Some(id) = finished {
        reads.push((
            "get_command_status p50, finished".to_string(),
            tool("get_command_status", json!({"command_id": id})),
        ));
    }
    reads
}

/// What one serve's rounds measured: its ping, and a row per probe against that ping.
pub(super) struct Rounds {
    pub ping: Latencies,
    pub tools_list: Latencies,
    pub rows: Vec<Row>,
}

/// `calls` rounds of `ping` and `tools/list`, then `calls` rounds of `ping` and each read of
/// `device` (and of the finished command, when there is one); `page` is how many devices
/// `list_devices` answers with. Apart, because a list of 100 relays' tools (240 KB) in the
/// reads' rounds slowed the reads after it by a third.
pub(super) async fn measure(
    rpc: &mut Rpc,
    calls: usize,
    device: &str,
    finished: Option<&str>,
    page: usize,
) -> Result<Rounds> {
    let label = "closedloop: ping and tools/list, interleaved";
    let (list_ping, mut list) = interleaved(rpc, label, calls, &[tools_list()]).await?;
    let tools_list = list.remove(0);
    let listed = tools_listed(rpc).await?;
    let mut rows = vec![ratio_row(&listed, &tools_list, &list_ping, "ping")];
    let reads = reads(device, finished, page);
    let probes: Vec<Probe> = reads.iter().map(|(_, p)| p.clone()).collect();
    let label = "closedloop: ping and the reads, interleaved";
    let (ping, samples) = interleaved(rpc, label, calls, &probes).await?;
    rows.extend(
        reads
            .iter()
            .zip(samples)
            .map(|((label, _), s)| ratio_row(label, &s, &ping, "ping")),
    );
    Ok(Rounds {
        ping,
        tools_list,
        rows,
    })
}

/// The label of the `tools/list` row: how many tools, how many bytes of JSON.
async fn tools_listed(rpc: &mut Rpc) -> Result<String> {
    let listed = rpc.call("tools/list", Value::Null).await?;
    let tools = listed["tools"].as_array().map_or(0, Vec::len);
    let kb = listed.to_string().len() as f64 / 1000.0;
    Ok(format!("tools/list p50, {tools} tools, {kb:.1} KB"))
}

/// `calls` rounds of `ping` and then each of `probes` once: the pings' latencies and each
/// probe's.
pub(super) async fn interleaved(
    rpc: &mut Rpc,
    label: &str,
    calls: usize,
    probes: &[Probe],
) -> Result<(Latencies, Vec<Latencies>)> {
    let mut bar = Progress::new(label, calls);
    let mut ping = Vec::with_capacity(calls);
    let mut samples = vec![Vec::with_capacity(calls); probes.len()];
    let start = Instant::now();
    for i in 0..calls {
        ping.push(timed(rpc.round_trip("ping", Value::Null)).await?);
        for ((method, params), s) in probes.iter().zip(&mut samples) {
            s.push(timed(rpc.round_trip(method, params.clone())).await?);
        }
        bar.set(i + 1);
    }
    bar.finish();
    let total = start.elapsed();
    let probes = samples.into_iter().map(|s| Latencies::new(s, total));
    Ok((Latencies::new(ping, total), probes.collect()))
}

/// How long `call` took to answer.
async fn timed(call: impl std::future::Future<Output = Result<()>>) -> Result<Duration> {
    let t = Instant::now();
    call.await?;
    Ok(t.elapsed())
}
