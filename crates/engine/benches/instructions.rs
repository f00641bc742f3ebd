//! The workload behind closedloop's instruction-count figures (`scripts/instructions`): `ACTS`
//! act-and-confirm commands and `READS` device-state reads, run once, deterministically, so that
//! `valgrind --tool=callgrind` can count the instructions they cost.
//!
//! Why it exists: wall time on a shared, noisy machine varies by tens of percent from run to run,
//! so a speed regression of ten percent drowns in it. Instructions executed do not depend on how
//! busy the machine is; counted over two runs of different sizes and subtracted, they give the
//! cost of one command and of one read with start-up cancelled out, stable enough to fail CI on
//! (`bench/instructions.baseline`).
//!
//! What makes it repeatable:
//! - One runtime thread (current-thread) runs the engine, the link and the caller. The journal
//!   still commits on its own threads (its writer and sqlx's SQLite worker), as in production:
//!   that work is part of what a command costs and is counted too.
//! - Nothing is decided by a timer. The runtime keeps real time (a paused clock would jump to the
//!   command's deadline whenever the runtime idles waiting for a journal commit on another
//!   thread), so instead the relay's physics are instantaneous and its link reads only when
//!   asked: the contact follows the coil on the write itself, and the engine's own read after
//!   the acknowledgement confirms it. How long valgrind takes to get there changes no count.
//!   `expect_s` is long enough that the settle read never fires before that read is judged.
//! - Commands alternate on and off, so `done_when` never already holds at dispatch (which would
//!   make the confirmation wait for `expect_s`).
//! - The relay stamps its samples with one fixed time, so a read's text is the same in every run.
//! - Every command must end `completed`, or the program panics: a count of failures would be a
//!   figure of nothing.
//!
//! What is left to chance — how the journal's threads and the runtime interleave — the script
//! keeps small with glibc malloc tunables and valgrind's fair scheduler (see its header).
//!
//! `instructions load N` parses a plant of N relays and nothing else: the script compares the
//! instructions of loading 4,000 relays with 1,000 to guard against a quadratic step creeping
//! back into loading (validation, expression dry-runs, tool generation once were).
//!
//! Usage: `instructions ACTS READS` (built by `cargo bench -p closedloop-engine --bench
//! instructions --no-run`; `scripts/instructions` runs it under callgrind). `cargo bench` runs a
//! small workload and prints its wall time, which is no figure to compare.

use closedloop_contract::{BoxFuture, ErrorCode, Value};
use closedloop_engine::{Engine, Status, Submission};
use closedloop_journal::Journal;
use closedloop_link::{
    Clock, Encoded, Evaluated, Link, Links, PlanError, Reporting, Request, Snapshot, SnapshotTx,
    WriteError, judge_liveness,
};
use closedloop_plant::WriteEntry;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The relay's one device, as the plant declares it. The driver is never opened: the engine
/// uses the link it is given. `poll_ms` and `expect_s` only set the deadline and the settle
/// read (see the module doc): the link reads when asked, and the relay switches at once.
const PLANT: &str = r#"
[[device]]
id = "relay"
description = "A relay whose auxiliary contact follows its coil."
driver = { kind = "modbus-tcp", address = "127.0.0.1:9", unit = 1 }
poll_ms = 1000
[device.signals]
commanded = { coil = 0 }
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch the relay on or off."
params = { on = { type = "bool", description = "true to switch on" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 5
idempotent = true
"#;

/// The link's own liveness window: far longer than any run, so no read is ever late.
const LIVENESS_WINDOW: Duration = Duration::from_secs(3600);

/// The wall-clock time the relay stamps on every sample: 2021-11-22T12:34:56.789Z, whose text
/// needs no zero padding. Stamped with the real time, a read's JSON would cost more or less
/// from one run to the next (`09` seconds and `042` ms are padded, `42` and `142` are not).
const DEVICE_TIME_MS: i64 = 1_637_584_496_789;

/// The relay: its coil, its contact and the number of the last read issued.
struct Relay {
    coil: bool,
    contact: bool,
    seq: u64,
}

/// A coil value: the only request the relay's link knows.
#[derive(Debug)]
struct Coil(bool);

impl fmt::Display for Coil {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bench coil {}", self.0)
    }
}

impl Encoded for Coil {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An in-memory relay behind the engine's link seam, read only when asked.
struct RelayLink {
    relay: Mutex<Relay>,
    tx: SnapshotTx,
    ask: Notify,
    started: Instant,
}

impl RelayLink {
    fn new() -> Arc<RelayLink> {
        Arc::new(RelayLink {
            relay: Mutex::new(Relay {
                coil: false,
                contact: false,
                seq: 0,
            }),
            tx: SnapshotTx::new(Snapshot::before_first_read()),
            ask: Notify::new(),
            started: Instant::now(),
        })
    }

    /// One read cycle: both signals, numbered when issued, published as one sample.
    fn read(&self) {
        let (seq, coil, contact) = {
            let mut r = self.relay.lock().unwrap_or_else(|p| p.into_inner());
            r.seq += 1;
            (r.seq, r.coil, r.contact)
        };
        self.tx.send_modify(|snap| {
            let (at_ms, coil, contact) = (DEVICE_TIME_MS, Value::Bool(coil), Value::Bool(contact));
            snap.record("commanded", coil, at_ms, seq, || "bench:coil:0".into());
            let source = || "bench:discrete_input:0".into();
            snap.record("contact", contact, at_ms, seq, source);
            snap.seq = seq;
            snap.last_valid = Some(Instant::now());
            snap.last_seen_ms = Some(DEVICE_TIME_MS);
            snap.liveness = judge_liveness(snap, LIVENESS_WINDOW, self.started);
        });
    }
}

impl Link for RelayLink {
    fn describe(&self) -> String {
        "bench relay".into()
    }

    fn reporting(&self) -> Reporting {
        Reporting::Polled
    }

    fn samples(&self) -> &SnapshotTx {
        &self.tx
    }

    fn current(&self) -> Snapshot {
        let mut snap = self.tx.borrow().clone();
        snap.liveness = judge_liveness(&snap, LIVENESS_WINDOW, self.started);
        snap
    }

    fn fence(&self) -> u64 {
        self.relay.lock().unwrap_or_else(|p| p.into_inner()).seq
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        match (entry, values.values.first()) {
            (WriteEntry::Register { .. }, Some(Value::Bool(on))) => Ok(Arc::new(Coil(*on))),
            _ => Err(PlanError(format!("{} is not a coil", entry.describe()))),
        }
    }

    /// Sets the coil; the contact follows at once. The fence is the last read issued before
    /// this acknowledgement, so only a later read can confirm the switch.
    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        _expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move {
            let Some(Coil(on)) = request.as_any().downcast_ref::<Coil>() else {
                return Err(WriteError {
                    code: ErrorCode::BusNak,
                    detail: format!("{request} is not for the relay"),
                    transient: false,
                    maybe_applied: false,
                });
            };
            let mut r = self.relay.lock().unwrap_or_else(|p| p.into_inner());
            r.coil = *on;
            r.contact = *on;
            Ok(r.seq)
        })
    }

    fn ask(&self) {
        self.ask.notify_one();
    }

    fn fresh(&self, within: Duration) -> BoxFuture<'_, Snapshot> {
        Box::pin(closedloop_link::ask_and_wait(self, within))
    }

    /// Reads once at start, then only when asked: no timer decides how many reads a run sees.
    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            loop {
                self.read();
                tokio::select! {
                    _ = self.ask.notified() => {}
                    _ = stop.notified() => return,
                }
            }
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The run `cargo bench` and `cargo test --benches` make (they pass `--bench` or nothing): small,
/// to show the workload still completes.
const SMOKE: (u64, u64) = (20, 200);

/// `ACTS READS` from the command line ([`SMOKE`] without them), or a usage message.
fn counts() -> Result<(u64, u64), String> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let usage = "usage: instructions [ACTS READS] (two non-negative integers)";
    match args.as_slice() {
        [] => Ok(SMOKE),
        [acts, reads] => match (acts.parse(), reads.parse()) {
            (Ok(a), Ok(r)) => Ok((a, r)),
            _ => Err(usage.into()),
        },
        _ => Err(usage.into()),
    }
}

/// An engine over one relay, journaling to a SQLite file in `dir` as production does.
async fn engine_in(dir: &tempfile::TempDir) -> (Engine, Arc<RelayLink>) {
    let plant = closedloop_plant::parse(PLANT, "bench.toml", std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("the bench plant does not parse:\n{e}"));
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let journal = Journal::open(&url)
        .await
        .unwrap_or_else(|e| panic!("journal {url}: {e}"));
    let relay = RelayLink::new();
    let map = BTreeMap::from([("relay".to_string(), Arc::clone(&relay) as Arc<dyn Link>)]);
    let links = Links {
        clock: Clock::new(),
        map,
    };
    let engine = Engine::start(Arc::new(plant), journal, links)
        .await
        .unwrap_or_else(|e| panic!("engine: {e}"));
    // The relay's first read, which a run without commands would otherwise race.
    let mut samples = engine
        .watch_device("relay")
        .unwrap_or_else(|| panic!("the plant has no device relay"));
    let first = tokio::time::timeout(Duration::from_secs(10), samples.wait_for(|s| s.seq > 0));
    if !matches!(first.await, Ok(Ok(_))) {
        panic!("the relay was never read");
    }
    (engine, relay)
}

/// One act-and-confirm command, waited for; panics unless it completed, verified.
async fn switch(engine: &Engine, on: bool) {
    let args = serde_json::Map::from_iter([("on".to_string(), serde_json::Value::Bool(on))]);
    let result = engine
        .submit(Submission {
            device: "relay".into(),
            action: "switch".into(),
            args,
            wait: closedloop_engine::MAX_WAIT,
            ..Submission::default()
        })
        .await
        .unwrap_or_else(|e| panic!("submit: {e}"));
    assert!(
        result.status == Status::Completed && result.verified,
        "switching the relay {} did not complete: {result:#?}",
        if on { "on" } else { "off" }
    );
}

/// One read as an MCP `get_device_state` costs the engine: the state and its JSON text.
/// Returns the text's length, so the work cannot be optimised away. Never inlined: the script
/// counts the instructions of reads as those run inside this function (`--toggle-collect`).
#[inline(never)]
fn read(engine: &Engine) -> usize {
    let state = engine
        .device_state("relay")
        .unwrap_or_else(|| panic!("the plant has no device relay"));
    let text = serde_json::to_string(&state).unwrap_or_else(|e| panic!("device state JSON: {e}"));
    std::hint::black_box(text).len()
}

/// Runs the workload: `acts` commands alternating on and off, then `reads` reads.
async fn workload(acts: u64, reads: u64) {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary folder: {e}"));
    let (engine, relay) = engine_in(&dir).await;
    for i in 0..acts {
        switch(&engine, i % 2 == 0).await;
    }
    let mut bytes = 0;
    for _ in 0..reads {
        bytes += read(&engine);
    }
    let (writes, commits) = engine.journal_write_counts();
    engine.shutdown().await;
    // One relay read at start and two a command (before the write, after its acknowledgement):
    // more would mean a timer took part.
    eprintln!(
        "instructions bench: {acts} acts, {reads} reads ({bytes} bytes of state), {} relay \
         reads, {writes} journal writes in {commits} commits, {} ms",
        relay.fence(),
        started.elapsed().as_millis()
    );
}

/// `load N`: parses a plant of N relays and nothing else, for the growth guard of loading.
fn load(n: usize) {
    let mut src = String::from("[server]\nname = \"load\"\njournal = \"sqlite://load.db\"\n");
    for i in 0..n {
        src.push_str(&format!(
            "\n[[device]]\nid = \"relay{i}\"\ndescription = \"Relay {i}.\"\n\
             driver = {{ kind = \"sim\", model = \"relay\" }}\n[device.signals]\n\
             contact = {{ discrete_input = 0 }}\n[[device.action]]\nname = \"switch\"\n\
             description = \"Switch relay {i} and confirm it on its contact.\"\n\
             params = {{ on = {{ type = \"bool\" }} }}\n\
             write = [{{ coil = 0, value = \"params.on\" }}]\ndone_when = \"contact == params.on\"\n"
        ));
    }
    let plant = closedloop_plant::parse(&src, "load.toml", std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("the load plant does not parse:\n{e}"));
    assert_eq!(plant.devices.len(), n);
    println!("instructions bench: loaded {n} relays");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, n] = args.as_slice()
        && mode == "load"
    {
        match n.parse() {
            Ok(n) => return load(n),
            Err(_) => {
                eprintln!("usage: instructions load N (a non-negative integer)");
                std::process::exit(2);
            }
        }
    }
    let (acts, reads) = counts().unwrap_or_else(|usage| {
        eprintln!("{usage}");
        std::process::exit(2);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(workload(acts, reads));
}
