//! Act-and-confirm on the bundled relays: latency against the physical floor, and commands per
//! second with several relays at once.

use super::rpc::Rpc;
use super::stats::{Latencies, Progress, ms};
use super::{PARALLEL, POLL_MS, PULL_IN_MS, Row};
use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Switches `relay` to `on` and waits for the confirmed outcome; its command id.
async fn switch(rpc: &mut Rpc, relay: usize, on: bool) -> Result<String> {
    let r = rpc
        .tool(
            &format!("relay{relay}_switch"),
            json!({"on": on, "wait_s": 5}),
        )
        .await?;
    if r["status"] != "completed" {
        bail!("relay{relay}_switch ended {}: {}", r["status"], r["detail"]);
    }
    Ok(r["command_id"].as_str().unwrap_or_default().to_string())
}

/// The act-and-confirm rows, and the id of the last command (finished).
pub(super) async fn act(rpc: &mut Rpc, calls: usize) -> Result<(Vec<Row>, String)> {
    let floor = Duration::from_secs_f64((PULL_IN_MS as f64 + POLL_MS as f64 / 2.0) / 1000.0);
    let mut bar = Progress::new("closedloop: act-and-confirm, one relay", calls);
    let mut samples = Vec::with_capacity(calls);
    let mut last = String::new();
    let start = Instant::now();
    for i in 0..calls {
        let t = Instant::now();
        last = switch(rpc, 0, i % 2 == 0).await?;
        samples.push(t.elapsed());
        bar.set(i + 1);
    }
    bar.finish();
    let one = Latencies::new(samples, start.elapsed());
    let parallel = parallel(rpc, calls).await?;
    let physics = |q: Duration| Row {
        figure: String::new(),
        ours: ms(q),
        baseline: format!("{} (physics)", ms(floor)),
        ratio: Some(q.as_secs_f64() / floor.as_secs_f64()),
    };
    let rows = vec![
        Row {
            figure: "act-and-confirm p50, one relay".into(),
            ..physics(one.p50())
        },
        Row {
            figure: "act-and-confirm p99, one relay".into(),
            ..physics(one.p99())
        },
        Row {
            figure: format!("act-and-confirm commands/s, {PARALLEL} relays at once"),
            ours: format!("{:.0}", parallel.per_second()),
            baseline: String::new(),
            ratio: None,
        },
    ];
    Ok((rows, last))
}

/// `calls` switches spread over `PARALLEL` relays, `PARALLEL` in flight on the one pipe.
async fn parallel(rpc: &mut Rpc, calls: usize) -> Result<Latencies> {
    let mut bar = Progress::new("closedloop: act-and-confirm, relays at once", calls);
    let rounds = calls.div_ceil(PARALLEL);
    let mut samples = Vec::with_capacity(rounds * PARALLEL);
    let start = Instant::now();
    for round in 0..rounds {
        let t = Instant::now();
        let ids: Vec<u64> = (0..PARALLEL)
            .map(|relay| {
                rpc.send_call(
                    "tools/call",
                    json!({"name": format!("relay{relay}_switch"),
                           "arguments": {"on": round % 2 == 0, "wait_s": 5}}),
                )
            })
            .collect::<Result<_>>()?;
        rpc.flush().await?;
        for id in ids {
            let r: Value = rpc.answer(id).await?;
            let status = &r["structuredContent"]["status"];
            if status != "completed" {
                bail!("a parallel switch ended {status}");
            }
            samples.push(t.elapsed());
        }
        bar.set((round + 1) * PARALLEL);
    }
    bar.finish();
    Ok(Latencies::new(samples, start.elapsed()))
}
