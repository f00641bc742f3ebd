//! The engine's own throughput, without MCP in front: act-and-confirm commands per second with
//! many relays at once, and how long a durable accept takes while a steady load runs. The
//! plant is in-process simulated relays (1 ms pull-in, polled every 1 ms) and the journal is
//! SQLite on disk with `synchronous = FULL`, as `serve` runs it.

use super::stats::{Latencies, Progress, ms};
use anyhow::{Context, Result, bail};
use closedloop_engine::{Engine, Status, Submission};
use closedloop_journal::Journal;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Relays, each with one command in flight at a time.
pub const RELAYS: usize = 64;
/// Commands per second of the steady load under which accepts are timed.
pub const STEADY_PER_S: u64 = 1000;

/// What the engine figures found.
pub struct EngineFigures {
    /// Act-and-confirm commands, [`RELAYS`] in flight.
    pub burst: Latencies,
    /// `submit` with no wait (returns once `accepted` is on disk), under the steady load.
    pub accepts: Latencies,
    /// Commands answered per commit of the journal during the burst.
    pub writes_per_commit: f64,
    /// The journal's disk alone: a 4 KiB append made durable (`fdatasync`), [`FSYNCS`] times.
    /// No accept can be durable sooner, so it is the floor of `accepts`.
    pub disk: Latencies,
}

/// Appends timed to durability for the disk's own figure.
pub const FSYNCS: usize = 500;

/// Starts an engine on `RELAYS` simulated relays with its journal in `dir`.
async fn start(dir: &Path) -> Result<Engine> {
    let src = super::hall::relays(RELAYS, 1, 1);
    let file = dir.join("engine-bench.toml");
    std::fs::write(&file, src.replace("bench.db", "engine-bench.db"))?;
    let plant = closedloop_plant::load(&file).map_err(|e| anyhow::anyhow!("{e}"))?;
    let journal = Journal::open(&plant.server.journal).await?;
    let drivers = closedloop_connect::build_drivers(&plant)?;
    let links = drivers.open(&plant.devices)?;
    let engine = Engine::start(Arc::new(plant), journal, links).await?;
    for _ in 0..200 {
        let online = (0..RELAYS).all(|i| {
            engine
                .device_state(&format!("relay{i}"))
                .is_some_and(|s| s.liveness == closedloop_engine::Liveness::Online)
        });
        if online {
            return Ok(engine);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the engine bench's relays did not come online within 10 s")
}

/// Switches `relay` and returns once it ended; an outcome other than `completed` is an error.
async fn switch(engine: &Engine, relay: usize, on: bool, wait: Duration) -> Result<Status> {
    let args = json!({"on": on}).as_object().cloned().unwrap_or_default();
    let r = engine
        .submit(Submission {
            device: format!("relay{relay}"),
            action: "switch".into(),
            args,
            wait,
            ..Submission::default()
        })
        .await
        .with_context(|| format!("relay{relay}"))?;
    if wait > Duration::ZERO && r.status != Status::Completed {
        bail!(
            "relay{relay}: {:?} {}",
            r.status,
            r.detail.unwrap_or_default()
        );
    }
    Ok(r.status)
}

/// Runs both figures: `calls` act-and-confirm commands spread over the relays, then accepts
/// timed under [`STEADY_PER_S`] for as many calls.
pub async fn measure(dir: &Path, calls: usize) -> Result<EngineFigures> {
    let engine = Arc::new(start(dir).await?);
    let (writes_before, commits_before) = engine.journal_write_counts();
    let burst = burst(&engine, calls).await?;
    let (writes, commits) = engine.journal_write_counts();
    let writes_per_commit =
        (writes - writes_before) as f64 / (commits - commits_before).max(1) as f64;
    let accepts = steady(&engine, calls).await?;
    engine.shutdown().await;
    let dir = dir.to_path_buf();
    let disk = tokio::task::spawn_blocking(move || disk_syncs(&dir)).await??;
    Ok(EngineFigures {
        burst,
        accepts,
        writes_per_commit,
        disk,
    })
}

/// [`FSYNCS`] appends of 4 KiB to a file in `dir` (the journal's directory), each timed until
/// `fdatasync` returned: what the disk itself takes to make a write durable, as SQLite's commit
/// with `synchronous = FULL` asks of it.
fn disk_syncs(dir: &Path) -> Result<Latencies> {
    use std::io::Write;
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path).context("the fsync probe's file")?;
    let block = [0x5a_u8; 4096];
    let mut samples = Vec::with_capacity(FSYNCS);
    let start = Instant::now();
    for _ in 0..FSYNCS {
        let t = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        samples.push(t.elapsed());
    }
    let total = start.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(Latencies::new(samples, total))
}

/// Every relay switched back and forth by its own task until `calls` commands completed.
async fn burst(engine: &Arc<Engine>, calls: usize) -> Result<Latencies> {
    let per_relay = calls.div_ceil(RELAYS);
    let bar = Arc::new(std::sync::Mutex::new(Progress::new(
        "engine: act-and-confirm, 64 relays at once",
        per_relay * RELAYS,
    )));
    let start = Instant::now();
    let tasks: Vec<_> = (0..RELAYS)
        .map(|relay| {
            let (engine, bar) = (Arc::clone(engine), Arc::clone(&bar));
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(per_relay);
                for i in 0..per_relay {
                    let t = Instant::now();
                    switch(&engine, relay, i.is_multiple_of(2), Duration::from_secs(5)).await?;
                    samples.push(t.elapsed());
                    bar.lock().unwrap_or_else(|p| p.into_inner()).step();
                }
                anyhow::Ok(samples)
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(per_relay * RELAYS);
    for t in tasks {
        samples.extend(t.await??);
    }
    let total = start.elapsed();
    finish(bar);
    Ok(Latencies::new(samples, total))
}

/// `calls` submissions paced at [`STEADY_PER_S`] (round-robin over the relays), each timed to
/// its durable accept.
async fn steady(engine: &Arc<Engine>, calls: usize) -> Result<Latencies> {
    let bar = Arc::new(std::sync::Mutex::new(Progress::new(
        "engine: durable accept under 1,000 commands/s",
        calls,
    )));
    let period = Duration::from_micros(1_000_000 / STEADY_PER_S);
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(calls);
    for i in 0..calls {
        ticks.tick().await;
        let (engine, bar) = (Arc::clone(engine), Arc::clone(&bar));
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let relay = i % RELAYS;
            let status = switch(
                &engine,
                relay,
                (i / RELAYS).is_multiple_of(2),
                Duration::ZERO,
            )
            .await;
            let took = t.elapsed();
            bar.lock().unwrap_or_else(|p| p.into_inner()).step();
            status.map(|_| took)
        }));
    }
    let mut samples = Vec::with_capacity(calls);
    for t in tasks {
        samples.push(t.await??);
    }
    let total = start.elapsed();
    finish(bar);
    Ok(Latencies::new(samples, total))
}

fn finish(bar: Arc<std::sync::Mutex<Progress>>) {
    if let Ok(m) = Arc::try_unwrap(bar) {
        m.into_inner().unwrap_or_else(|p| p.into_inner()).finish();
    }
}

/// The engine table's rows.
pub fn rows(f: &EngineFigures) -> Vec<Vec<String>> {
    vec![
        vec![
            format!(
                "act-and-confirm commands/s, {RELAYS} relays at once (1 ms pull-in, 1 ms poll)"
            ),
            format!("{:.0}", f.burst.per_second()),
        ],
        vec![
            "their latency p50 / p99".into(),
            format!("{} / {}", ms(f.burst.p50()), ms(f.burst.p99())),
        ],
        vec![
            "journal writes per fsync during them".into(),
            format!("{:.1}", f.writes_per_commit),
        ],
        vec![
            format!("durable accept p50 / p99 under {STEADY_PER_S} commands/s"),
            format!("{} / {}", ms(f.accepts.p50()), ms(f.accepts.p99())),
        ],
        vec![
            "the disk alone: a 4 KiB append made durable, p50 / p99".into(),
            format!("{} / {}", ms(f.disk.p50()), ms(f.disk.p99())),
        ],
    ]
}
