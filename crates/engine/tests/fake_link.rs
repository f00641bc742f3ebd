//! A protocol the engine has never heard of: an in-memory tank written here, behind
//! `closedloop_link::Link`, drives full commands through the engine with no engine change.
//!
//! The tank's level follows a written set-point after a delay (its "physics"); the test reads
//! that ground truth and checks that the engine's outcome says exactly what the tank did —
//! including a sample taken before the write's acknowledgement, which must never confirm it,
//! and a driver that panics, which must never leave a command showing `running`.

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

/// How the tank answers a write.
#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    /// Reaches the set-point 30 ms after the write.
    Follows,
    /// Acknowledges, and right then reports the set-point in a sample read *before* the
    /// acknowledgement (numbered at the fence); the level itself never moves.
    StaleEcho,
    /// Its first write panics (a driver bug), before anything reaches the tank; then follows.
    PanicsOnce,
    /// The write breaks the level gauge (it reads NaN from then on) and, 30 ms later, the tank
    /// overflows: its `overflow` contact closes.
    BreaksAndOverflows,
    /// The write breaks the level gauge (it reads NaN from then on); nothing else happens.
    BreaksGauge,
}

struct Tank {
    behaviour: Behaviour,
    level: f64,
    /// Ground truth of the overflow contact, and from when it closes.
    overflow_at: Option<Instant>,
    /// The set-point and when the level reaches it.
    moving: Option<(f64, Instant)>,
    /// The number of the last read issued.
    seq: u64,
}

/// A set-point for the tank: the only request this protocol knows.
#[derive(Debug)]
struct SetPoint(f64);

impl fmt::Display for SetPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "memory set-point {}", self.0)
    }
}

impl Encoded for SetPoint {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct MemoryLink {
    tank: Mutex<Tank>,
    tx: SnapshotTx,
    ask: Notify,
    clock: Clock,
    started: Instant,
}

impl MemoryLink {
    fn new(behaviour: Behaviour, clock: Clock) -> Arc<MemoryLink> {
        Arc::new(MemoryLink {
            tank: Mutex::new(Tank {
                behaviour,
                level: 10.0,
                overflow_at: None,
                moving: None,
                seq: 0,
            }),
            tx: SnapshotTx::new(Snapshot::before_first_read()),
            ask: Notify::new(),
            clock,
            started: Instant::now(),
        })
    }

    /// Ground truth: the tank's level now.
    fn level(&self) -> f64 {
        self.tank.lock().unwrap().level
    }

    /// Ground truth: whether the tank overflows now.
    fn overflowing(&self) -> bool {
        (self.tank.lock().unwrap().overflow_at).is_some_and(|at| Instant::now() >= at)
    }

    /// One read: the level (and the overflow contact), numbered when issued.
    fn read(&self) {
        let (seq, level) = {
            let mut t = self.tank.lock().unwrap();
            if let Some((to, at)) = t.moving
                && Instant::now() >= at
            {
                t.level = to;
                t.moving = None;
            }
            t.seq += 1;
            (t.seq, t.level)
        };
        self.publish(seq, level);
    }

    fn publish(&self, seq: u64, level: f64) {
        let now = Instant::now();
        let overflow = self.overflowing();
        self.tx.send_modify(|snap| {
            let at_ms = self.clock.wall_ms(now);
            // A broken gauge's NaN goes through `record` as any decoder's value does.
            snap.record("level", Value::Number(level), at_ms, seq, || {
                "memory:level".into()
            });
            snap.record("overflow", Value::Bool(overflow), at_ms, seq, || {
                "memory:overflow".into()
            });
            snap.seq = seq;
            snap.last_valid = Some(now);
            snap.last_seen_ms = Some(self.clock.wall_ms(now));
            snap.liveness = judge_liveness(snap, Duration::from_secs(2), self.started);
        });
    }
}

impl Link for MemoryLink {
    fn describe(&self) -> String {
        "memory tank".into()
    }

    fn reporting(&self) -> Reporting {
        Reporting::Polled
    }

    fn samples(&self) -> &SnapshotTx {
        &self.tx
    }

    fn current(&self) -> Snapshot {
        let mut snap = self.tx.borrow().clone();
        snap.liveness = judge_liveness(&snap, Duration::from_secs(2), self.started);
        snap
    }

    fn fence(&self) -> u64 {
        self.tank.lock().unwrap().seq
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        match (entry, values.values.first()) {
            (WriteEntry::Register { .. }, Some(Value::Number(n))) => Ok(Arc::new(SetPoint(*n))),
            _ => Err(PlanError(format!(
                "{} is not a set-point",
                entry.describe()
            ))),
        }
    }

    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        _expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move {
            let Some(SetPoint(to)) = request.as_any().downcast_ref::<SetPoint>() else {
                return Err(WriteError {
                    code: ErrorCode::BusNak,
                    detail: format!("{request} is not for the tank"),
                    transient: false,
                    maybe_applied: false,
                });
            };
            let (fence, behaviour) = {
                let mut t = self.tank.lock().unwrap();
                if t.behaviour == Behaviour::PanicsOnce {
                    t.behaviour = Behaviour::Follows;
                    drop(t);
                    panic!("tank driver bug: set-point {to} overflowed");
                }
                if t.behaviour == Behaviour::Follows {
                    t.moving = Some((*to, Instant::now() + Duration::from_millis(30)));
                }
                if t.behaviour == Behaviour::BreaksAndOverflows {
                    t.level = f64::NAN;
                    t.overflow_at = Some(Instant::now() + Duration::from_millis(30));
                }
                if t.behaviour == Behaviour::BreaksGauge {
                    t.level = f64::NAN;
                }
                (t.seq, t.behaviour)
            };
            if behaviour == Behaviour::StaleEcho {
                // A reading taken before the acknowledgement, arriving after it.
                self.publish(fence, *to);
            }
            Ok(fence)
        })
    }

    fn ask(&self) {
        self.ask.notify_one();
    }

    fn fresh(&self, within: Duration) -> BoxFuture<'_, Snapshot> {
        Box::pin(closedloop_link::ask_and_wait(self, within))
    }

    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            loop {
                self.read();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
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

/// The plant names a driver the engine never opens: the link given to it is the one used.
const PLANT: &str = r#"
[[device]]
id = "tank"
description = "A tank whose level follows a set-point."
driver = { kind = "modbus-tcp", address = "127.0.0.1:9", unit = 1 }
poll_ms = 10
[device.signals]
level = { input = 0, unit = "mm" }
overflow = { discrete_input = 0 }
[[device.action]]
name = "fill"
description = "Fill the tank to a level."
params = { mm = { type = "number", min = 0, max = 100, unit = "mm" } }
write = [{ holding = 0, value = "params.mm" }]
done_when = "level == params.mm"
fail_when = { OVERFLOW = "overflow" }
expect_s = 0.05
"#;

async fn engine_with(behaviour: Behaviour, dir: &tempfile::TempDir) -> (Engine, Arc<MemoryLink>) {
    engine_on(PLANT, behaviour, dir).await
}

async fn engine_on(
    src: &str,
    behaviour: Behaviour,
    dir: &tempfile::TempDir,
) -> (Engine, Arc<MemoryLink>) {
    let plant = closedloop_plant::parse(src, "tank.toml", std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let journal = Journal::open(&url).await.unwrap();
    let clock = Clock::new();
    let tank = MemoryLink::new(behaviour, clock);
    let mut map: BTreeMap<String, Arc<dyn Link>> = BTreeMap::new();
    map.insert("tank".into(), Arc::clone(&tank) as Arc<dyn Link>);
    let engine = Engine::start(Arc::new(plant), journal, Links { clock, map })
        .await
        .unwrap();
    (engine, tank)
}

async fn fill(engine: &Engine, mm: f64) -> closedloop_engine::CommandResult {
    let mut args = serde_json::Map::new();
    args.insert("mm".into(), serde_json::json!(mm));
    engine
        .submit(Submission {
            device: "tank".into(),
            action: "fill".into(),
            args,
            wait: Duration::from_secs(5),
            ..Submission::default()
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_protocol_the_engine_never_heard_of_completes_a_command_the_tank_carried_out() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tank) = engine_with(Behaviour::Follows, &dir).await;
    let r = fill(&engine, 42.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    assert!(r.verified && r.error_code.is_none(), "{r:#?}");
    assert_eq!(tank.level(), 42.0, "ground truth");
    assert_eq!(r.evidence["level"]["value"], serde_json::json!(42.0));
    assert_eq!(r.evidence["level"]["source"], "memory:level");
    let dispatched = r
        .timeline
        .iter()
        .find(|e| e.event == "dispatched")
        .expect("dispatched");
    assert!(
        serde_json::Value::Object(dispatched.data.clone())
            .to_string()
            .contains("memory set-point 42"),
        "the link's own request text is journaled: {dispatched:?}"
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_sample_read_before_the_acknowledgement_never_confirms_a_write_on_any_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tank) = engine_with(Behaviour::StaleEcho, &dir).await;
    let r = fill(&engine, 42.0).await;
    assert_eq!(tank.level(), 10.0, "ground truth: the tank never moved");
    // The level never moved after the acknowledgement: the feedback contradicts the command.
    assert_eq!(r.status, Status::Failed, "{r:#?}");
    assert_eq!(r.error_code, Some(ErrorCode::FeedbackMismatch), "{r:#?}");
    assert!(!r.verified);
    engine.shutdown().await;
}

/// A driver bug (a panic in its write) ends the command on the record — `failed INTERRUPTED`,
/// an `internal_error` entry on its timeline — where it showed `accepted` with nothing
/// supervising it until the gateway restarted; the tank is free for the next command.
#[tokio::test]
async fn a_panic_in_a_drivers_write_ends_the_command_interrupted_and_frees_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tank) = engine_with(Behaviour::PanicsOnce, &dir).await;
    let r = fill(&engine, 42.0).await;
    assert_eq!(tank.level(), 10.0, "ground truth: nothing reached the tank");
    assert_eq!(r.status, Status::Failed, "{r:#?}");
    assert_eq!(r.error_code, Some(ErrorCode::Interrupted), "{r:#?}");
    assert!(!r.verified);
    let crash = r
        .timeline
        .iter()
        .find(|e| e.event == closedloop_engine::crash::INTERNAL_ERROR)
        .expect("an internal_error entry");
    assert_eq!(
        crash.data["message"],
        "tank driver bug: set-point 42 overflowed"
    );
    let detail = r.detail.as_deref().unwrap();
    assert!(
        detail.starts_with("closedloop's supervision of this command failed with an internal error (tank driver bug: set-point 42 overflowed) after the write was sent; nothing confirms what the device did, and the action has no cancel plan to stop it."),
        "{detail}"
    );
    let next = fill(&engine, 42.0).await;
    assert_eq!(next.status, Status::Completed, "{next:#?}");
    assert_eq!(tank.level(), 42.0, "ground truth");
    engine.shutdown().await;
}

/// The same bug in an action with a cancel plan: the write may have gone out, so a fresh
/// supervisor writes the stop before the command ends, as recovery does after a restart.
#[tokio::test]
async fn after_a_drivers_panic_the_cancel_plan_is_written_before_the_command_ends() {
    let dir = tempfile::tempdir().unwrap();
    let with_stop = PLANT.replace(
        "expect_s = 0.05",
        "expect_s = 0.05\ncancel = [{ holding = 0, value = \"7\" }]",
    );
    let (engine, tank) = engine_on(&with_stop, Behaviour::PanicsOnce, &dir).await;
    let r = fill(&engine, 42.0).await;
    assert_eq!(r.status, Status::Failed, "{r:#?}");
    assert_eq!(r.error_code, Some(ErrorCode::Interrupted), "{r:#?}");
    let events: Vec<&str> = r.timeline.iter().map(|e| e.event.as_str()).collect();
    let at = |e: &str| events.iter().position(|x| *x == e);
    assert!(at("cancel_sent") < at("internal_error"), "{events:?}");
    assert!(at("internal_error") < at("failed"), "{events:?}");
    let detail = r.detail.as_deref().unwrap();
    assert!(
        detail.contains("after the write was sent; the cancel plan (stop) was written"),
        "{detail}"
    );
    tokio::time::sleep(Duration::from_millis(60)).await;
    tank.read();
    assert_eq!(tank.level(), 7.0, "ground truth: the stop reached the tank");
    engine.shutdown().await;
}

/// The write breaks the level gauge (NaN from then on, through `Snapshot::record`) and the tank
/// overflows 30 ms later: waiting for a level that never comes must not keep the overflow from
/// failing the command — it ends `failed OVERFLOW` on its fresh contact, not `NO_FEEDBACK` at
/// the deadline, the contact closed in ground truth.
#[tokio::test]
async fn a_gauge_reading_nan_never_keeps_an_overflow_from_failing_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tank) = engine_with(Behaviour::BreaksAndOverflows, &dir).await;
    let r = fill(&engine, 42.0).await;
    assert_eq!(
        (
            r.status,
            r.error_code.as_ref().map(|c| c.as_str().to_string())
        ),
        (Status::Failed, Some("OVERFLOW".to_string())),
        "{r:#?}"
    );
    assert!(tank.overflowing(), "ground truth: it overflowed");
    assert_eq!(
        r.evidence["overflow"]["value"],
        serde_json::json!(true),
        "{r:#?}"
    );
    let state = engine.device_state("tank").unwrap();
    assert!(state.unreadable.contains_key("level"), "{state:#?}");
    assert!(
        state.unreadable["level"].detail.contains("NaN"),
        "{state:#?}"
    );
    engine.shutdown().await;
}

/// A polled gauge reading NaN from the write on answers every poll, with no value: at the
/// deadline the command is `failed NO_FEEDBACK` saying what came, the device online — never
/// `DEVICE_OFFLINE` (what the no-value deadline said for a polled device, a Modbus float
/// register or a CAN value the DBC labels "SNA", for one commit).
#[tokio::test]
async fn a_polled_gauge_reading_nan_to_the_deadline_is_no_feedback_not_offline() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, tank) = engine_with(Behaviour::BreaksGauge, &dir).await;
    let r = fill(&engine, 42.0).await;
    assert_eq!(
        (
            r.status,
            r.error_code.as_ref().map(|c| c.as_str().to_string())
        ),
        (Status::Failed, Some("NO_FEEDBACK".to_string())),
        "{r:#?}"
    );
    let detail = r.detail.clone().unwrap_or_default();
    assert!(detail.contains("level has had no value since"), "{detail}");
    assert!(tank.level().is_nan(), "ground truth: the gauge is broken");
    engine.shutdown().await;
}
