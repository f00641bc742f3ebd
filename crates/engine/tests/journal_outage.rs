//! A journal that stops taking writes while a command runs: the command is never reported beyond
//! what the journal holds, its device stays held, and once writes succeed again the command ends
//! as the hardware says, with nothing lost.

mod common;

use closedloop_engine::{Engine, Status, Submission};
use closedloop_journal::Journal;
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_waits_for_its_journal_and_then_ends_as_the_hardware_says() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let journal = Journal::open(&url).await.unwrap();
    let plant = plant(&slide(""));
    let drivers = closedloop_connect::build_drivers(&plant).unwrap();
    let slide_sim = drivers.sims["slide"].clone();
    let links = drivers.open(&plant.devices).expect("links");
    let engine = Engine::start(Arc::new(plant), journal.clone(), links)
        .await
        .unwrap();
    let submit = |target: f64| Submission {
        device: "slide".into(),
        action: "move_to".into(),
        args: json!({"target_mm": target}).as_object().cloned().unwrap(),
        wait: Duration::from_millis(200),
        ..Submission::default()
    };
    let r = engine.submit(submit(100.0)).await.unwrap();
    assert_eq!(r.status, Status::Running, "{r:#?}");

    // The disk stops taking writes while the axis travels (1 s).
    journal.fail_writes(true);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let pos = slide_sim.peek().position_mm.unwrap();
    assert!((pos - 100.0).abs() < 0.01, "the axis arrived: {pos}");
    let held = engine.status(&r.command_id, Duration::ZERO).await.unwrap();
    assert_eq!(
        held.status,
        Status::Running,
        "never ahead of the journal: {held:#?}"
    );
    // Its device stays held: a second command is accepted only once the journal takes it, and
    // until then nothing moves.
    let second = engine.submit(submit(20.0)).await;
    assert!(
        second.is_err(),
        "no command is accepted without its journal entry"
    );
    assert!((slide_sim.peek().position_mm.unwrap() - 100.0).abs() < 0.01);

    // The disk is back: the command ends `completed`, with evidence, and the journal has it.
    journal.fail_writes(false);
    let done = engine
        .status(&r.command_id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(done.status, Status::Completed, "{done:#?}");
    assert!(done.verified);
    let row = journal.get(&r.command_id).await.unwrap().unwrap();
    assert_eq!(row.status, "completed");
    let events: Vec<String> = journal
        .events(&r.command_id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(events.contains(&"completed".to_string()), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_journal_takes_no_writes_fails_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let src = slide("");
    let journal = Journal::open(&url).await.unwrap();
    let first = plant(&src);
    let drivers = closedloop_connect::build_drivers(&first).unwrap();
    let links = drivers.open(&first.devices).expect("links");
    let engine = Engine::start(Arc::new(first), journal, links)
        .await
        .unwrap();
    let r = engine
        .submit(Submission {
            device: "slide".into(),
            action: "move_to".into(),
            args: json!({"target_mm": 300.0}).as_object().cloned().unwrap(),
            wait: Duration::from_millis(200),
            ..Submission::default()
        })
        .await
        .unwrap();
    assert_eq!(r.status, Status::Running, "{r:#?}");

    // A second start finds the running command to recover, but its journal takes no writes.
    let journal = Journal::open(&url).await.unwrap();
    journal.fail_writes(true);
    let second = plant(&src);
    let drivers = closedloop_connect::build_drivers(&second).unwrap();
    let links = drivers.open(&second.devices).expect("links");
    let started = tokio::time::timeout(
        Duration::from_secs(20),
        Engine::start(Arc::new(second), journal, links),
    )
    .await
    .expect("the start ends instead of hanging");
    assert!(
        matches!(started, Err(closedloop_engine::EngineError::Journal(_))),
        "a journal error: {:?}",
        started.err()
    );
    drop(engine);
}
