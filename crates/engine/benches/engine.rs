//! Criterion benchmarks for the engine's hot steps: one state-machine step, one CEL evaluation of
//! a typical `done_when`, and one durable accept (a journal insert committed with
//! `synchronous = FULL`). Run: `cargo bench -p closedloop-engine`.

use closedloop_contract::Value;
use closedloop_engine::machine::{Check, Event, Machine, Profile, Reading};
use closedloop_journal::{CommandRow, EventRow, Journal};
use closedloop_plant::{Expr, ParamValue, Params, Scope};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::BTreeMap;
use std::hint::black_box;

fn profile() -> Profile {
    Profile {
        check: Check::Feedback,
        idempotent: true,
        has_cancel: true,
        has_started_when: false,
        hold_ms: 0,
        max_attempts: 3,
        readback_only: false,
    }
}

fn machine_step(c: &mut Criterion) {
    let reading = Event::Reading(Reading {
        at_ms: 5,
        done: false,
        failed: None,
        started: true,
        moved: true,
        early: false,
        stopped: false,
        settled: true,
        baseline_known: true,
        already: false,
    });
    c.bench_function("machine/reading_step", |b| {
        let mut m = Machine::new(profile());
        m.on(Event::Accept);
        m.on(Event::Dispatch);
        m.on(Event::WriteAcked);
        b.iter(|| black_box(m.on(black_box(reading.clone()))))
    });
    c.bench_function("machine/full_lifecycle", |b| {
        b.iter(|| {
            let mut m = Machine::new(profile());
            m.on(Event::Accept);
            m.on(Event::Dispatch);
            m.on(Event::WriteAcked);
            m.on(Event::Reading(Reading {
                at_ms: 5,
                done: true,
                failed: None,
                started: true,
                moved: true,
                early: false,
                stopped: false,
                settled: true,
                baseline_known: true,
                already: false,
            }));
            black_box(m.status())
        })
    });
}

fn cel_eval(c: &mut Criterion) {
    let expr =
        match Expr::compile("abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault") {
            Ok(e) => e,
            Err(e) => panic!("benchmark expression does not compile: {e}"),
        };
    let signals: BTreeMap<String, Value> = [
        ("position_mm".to_string(), Value::Number(149.9)),
        ("moving".to_string(), Value::Bool(false)),
        ("fault".to_string(), Value::Bool(false)),
    ]
    .into();
    let params: Params = [("target_mm".to_string(), ParamValue::Number(150.0))].into();
    let devices = BTreeMap::new();
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[],
    };
    c.bench_function("cel/done_when_eval", |b| {
        b.iter(|| black_box(expr.eval_bool(black_box(&scope))))
    });
}

fn durable_accept(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let journal = rt.block_on(Journal::open(&url)).expect("journal");
    let mut n = 0u64;
    c.bench_function("journal/durable_accept", |b| {
        b.iter(|| {
            n += 1;
            let row = CommandRow {
                command_id: format!("bench-{n}"),
                request_id: format!("req-{n}"),
                device: "lamp".into(),
                action: "switch".into(),
                params: serde_json::json!({"on": true}),
                status: "accepted".into(),
                verified: false,
                verification: "feedback".into(),
                error_code: None,
                detail: None,
                hint: None,
                evidence: serde_json::json!({}),
                readback_matched: None,
                accepted_at_ms: 0,
                updated_at_ms: 0,
                deadline_ms: None,
                dispatched: false,
                caller: None,
                idempotency_key: None,
            };
            let events = [
                EventRow {
                    at_ms: 0,
                    event: "received".into(),
                    data: serde_json::Value::Null,
                },
                EventRow {
                    at_ms: 0,
                    event: "accepted".into(),
                    data: serde_json::Value::Null,
                },
            ];
            rt.block_on(journal.insert(&row, &events)).expect("insert");
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = machine_step, cel_eval, durable_accept
}
criterion_main!(benches);
