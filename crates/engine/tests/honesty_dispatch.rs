//! The edges of the honesty rule (docs/architecture.md) around the write itself — a command found
//! offline at dispatch, a dispatch record the journal never took, recovery of an unacknowledged
//! move, a gateway answering 0x0B for its lost unit — each a regression test named after the
//! false outcome it once allowed, checked against the simulator's physical state.

mod common;

use closedloop_engine::{Engine, Status, Submission};
use closedloop_journal::Journal;
use closedloop_sim::{Fault, FaultSpec};
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_found_offline_at_dispatch_writes_no_stop() {
    let rig = rig(&slide("")).await;
    rig.online("slide").await;
    let first = rig
        .act("slide", "move_to", json!({"target_mm": 100.0}), 0.0)
        .await;
    let queued = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
        .await;
    assert_eq!(queued.status, Status::Accepted);
    rig.sim("slide").inject(FaultSpec::now(Fault::PowerOff));
    let first = rig.settle(&first).await;
    assert_eq!(code(&first), "DEVICE_OFFLINE", "{first:#?}");
    let queued = rig.settle(&queued).await;
    assert_eq!(
        (queued.status, code(&queued).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "{queued:#?}"
    );
    let ev = events(&queued);
    for never in ["dispatched", "cancel_sent", "cancel_failed"] {
        assert!(!ev.contains(&never.to_string()), "{never} in {ev:?}");
    }
    assert!(
        queued
            .detail
            .as_deref()
            .unwrap()
            .contains("Nothing was written")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_dispatch_record_the_journal_never_took_is_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let journal = Journal::open(&url).await.unwrap();
    // Every answer takes 300 ms: dispatch's fresh read gives time to fail the journal.
    let plant = plant(
        &relay(r#"{ kind = "latency_ms", ms = 300 }"#)
            .replace("max_silence_s = 0.5", "max_silence_s = 3.0"),
    );
    let drivers = closedloop_connect::build_drivers(&plant).unwrap();
    let lamp = drivers.sims["lamp"].clone();
    let links = drivers.open(&plant.devices).expect("links");
    let engine = Engine::start(Arc::new(plant), journal.clone(), links)
        .await
        .unwrap();
    let r = engine
        .submit(Submission {
            device: "lamp".into(),
            action: "switch".into(),
            args: json!({"on": true}).as_object().cloned().unwrap(),
            ..Submission::default()
        })
        .await
        .unwrap();
    assert_eq!(r.status, Status::Accepted, "{r:#?}");
    journal.fail_writes(true);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    engine.shutdown().await;
    assert!(
        !lamp.peek().coils[0],
        "a write went out whose `dispatched` the journal never took"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_writes_the_stop_of_a_move_whose_write_was_never_acknowledged() {
    // The journal of a gateway that died between sending a move and hearing its answer.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let id = "01a22e00-0000-7000-8000-000000000001";
    {
        let j = Journal::open(&url).await.unwrap();
        let now = 1_790_000_000_000;
        let row = closedloop_journal::CommandRow {
            command_id: id.into(),
            request_id: "req_before_the_crash".into(),
            device: "slide".into(),
            action: "move_to".into(),
            params: json!({"target_mm": 250.0}),
            status: "accepted".into(),
            verified: false,
            verification: "feedback".into(),
            error_code: None,
            detail: None,
            hint: None,
            evidence: json!({}),
            readback_matched: None,
            accepted_at_ms: now,
            updated_at_ms: now,
            deadline_ms: Some(now + 8_000),
            dispatched: true,
            caller: None,
            idempotency_key: None,
        };
        let ev = |event: &str| closedloop_journal::EventRow {
            at_ms: now,
            event: event.into(),
            data: json!(null),
        };
        j.insert(&row, &[ev("received"), ev("accepted"), ev("dispatched")])
            .await
            .unwrap();
        j.close().await;
    }
    let rig = rig_in(&slide(""), dir).await;
    let r = rig.engine.status(id, Duration::from_secs(3)).await.unwrap();
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "INTERRUPTED"),
        "{r:#?}"
    );
    assert!(
        events(&r).contains(&"cancel_sent".to_string()),
        "{:?}",
        events(&r)
    );
    assert!(
        r.detail.as_deref().unwrap().contains("stop) was written"),
        "{:?}",
        r.detail
    );
    assert!(!rig.sim("slide").peek().moving.unwrap());
}

/// A Modbus TCP gateway whose unit behind it is gone: every request is answered with
/// exception 0x0B (Gateway Target Device Failed to Respond). Returns its address.
async fn gateway_without_its_unit() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut header = [0u8; 7];
                while sock.read_exact(&mut header).await.is_ok() {
                    let len = usize::from(u16::from_be_bytes([header[4], header[5]]));
                    let mut pdu = vec![0u8; len.saturating_sub(1)];
                    if sock.read_exact(&mut pdu).await.is_err() || pdu.is_empty() {
                        return;
                    }
                    let answer = [
                        header[0],
                        header[1],
                        0,
                        0,
                        0,
                        3,
                        header[6],
                        pdu[0] | 0x80,
                        0x0B,
                    ];
                    if sock.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_exceptions_0x0b_are_no_sign_of_the_unit_s_life() {
    let addr = gateway_without_its_unit().await;
    let src = relay("").replace(
        r#"driver = { kind = "sim", model = "relay" }"#,
        &format!(r#"driver = {{ kind = "modbus-tcp", address = "{addr}", unit = 3 }}"#),
    );
    let rig = rig(&src).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    let state = rig.engine.device_state("lamp").unwrap();
    assert_eq!(
        state.liveness,
        closedloop_engine::Liveness::Offline,
        "{state:#?}"
    );
    assert!(
        r.detail.as_deref().unwrap().contains("exception 11"),
        "{:?}",
        r.detail
    );
}
