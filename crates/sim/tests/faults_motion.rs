//! Faults that change the physics: stall, brownout, swapped contacts (docs/simulator.md).

mod common;

use closedloop_contract::Area;
use closedloop_sim::{Fault, FaultKind, FaultSpec};
use common::*;

const SLIDE: &str = "model = \"stepper\"\nspeed_mm_s = 100.0\ntravel_mm = [0.0, 300.0]";

async fn start_to(d: &closedloop_sim::SimDevice, mm: f64) {
    target(d, mm).await.unwrap().unwrap();
    coils(d, 0, &[true]).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn stall_at_mm_stops_the_axis_there_with_fault() {
    let d = device(&format!(
        "{SLIDE}\nfaults = [{{ kind = \"stall\", at_mm = 70.0 }}]"
    ));
    start_to(&d, 150.0).await;
    advance_ms(690).await;
    assert_eq!(bits(&d, Area::DiscreteInput, 0, 2).await, vec![true, false]);
    advance_ms(310).await;
    assert_eq!(position_raw(&d).await, 7000);
    assert_eq!(
        bits(&d, Area::DiscreteInput, 0, 2).await,
        vec![false, true],
        "moving off, fault on"
    );
    // A start while the fault is active is ignored.
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
    assert!(bit(&d, Area::DiscreteInput, 1).await);
    // Fault reset clears it; a move away from the obstruction works.
    coils(&d, 2, &[true]).await.unwrap().unwrap();
    assert!(!bit(&d, Area::DiscreteInput, 1).await);
    start_to(&d, 10.0).await;
    advance_ms(600).await;
    assert_eq!(position_raw(&d).await, 1000);
    // The obstruction is still there for the next pass.
    start_to(&d, 150.0).await;
    advance_ms(2000).await;
    assert_eq!(position_raw(&d).await, 7000);
    assert!(bit(&d, Area::DiscreteInput, 1).await);
}

#[tokio::test(start_paused = true)]
async fn stall_after_ms_stops_where_the_axis_is() {
    let d = device(&format!(
        "{SLIDE}\nfaults = [{{ kind = \"stall\", after_ms = 500 }}]"
    ));
    start_to(&d, 150.0).await; // the first write (the target) starts the countdown
    advance_ms(2000).await;
    assert_eq!(position_raw(&d).await, 5000);
    assert_eq!(bits(&d, Area::DiscreteInput, 0, 2).await, vec![false, true]);
    assert!(d.faults().is_empty(), "a time stall is spent once struck");
}

#[tokio::test(start_paused = true)]
async fn static_stall_without_position_faults_from_the_start() {
    let d = device(&format!("{SLIDE}\nfaults = [{{ kind = \"stall\" }}]"));
    assert!(bit(&d, Area::DiscreteInput, 1).await);
    start_to(&d, 150.0).await;
    advance_ms(100).await;
    assert_eq!(
        position_raw(&d).await,
        0,
        "start is ignored while fault is active"
    );
}

#[tokio::test(start_paused = true)]
async fn injected_stall_mid_move_and_its_clearing() {
    let d = device(SLIDE);
    start_to(&d, 150.0).await;
    advance_ms(300).await;
    d.inject(FaultSpec::now(Fault::Stall { at_mm: Some(100.0) }));
    advance_ms(1000).await;
    assert_eq!(position_raw(&d).await, 10000);
    assert!(bit(&d, Area::DiscreteInput, 1).await);

    let d = device(SLIDE);
    d.inject(FaultSpec::now(Fault::Stall { at_mm: Some(100.0) }));
    start_to(&d, 150.0).await;
    advance_ms(500).await;
    d.clear(FaultKind::Stall);
    advance_ms(1000).await;
    assert_eq!(
        position_raw(&d).await,
        15000,
        "cleared before reaching it: no stall"
    );
    assert!(!bit(&d, Area::DiscreteInput, 1).await);
}

#[tokio::test(start_paused = true)]
async fn brownout_keeps_the_contact_open() {
    let d = device("model = \"relay\"\nfaults = [{ kind = \"brownout\" }]");
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(100).await;
    assert!(bit(&d, Area::Coil, 0).await, "commanded on");
    assert!(!bit(&d, Area::DiscreteInput, 0).await, "never closes");
    assert_eq!(d.peek().contact, Some(false));
    d.clear(FaultKind::Brownout);
    advance_ms(10).await;
    assert!(
        bit(&d, Area::DiscreteInput, 0).await,
        "closes pull_in after the supply is back"
    );
}

#[tokio::test(start_paused = true)]
async fn brownout_after_ms_opens_a_closed_contact() {
    let d = device("model = \"relay\"\nfaults = [{ kind = \"brownout\", after_ms = 50 }]");
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(10).await;
    assert!(bit(&d, Area::DiscreteInput, 0).await);
    advance_ms(40).await;
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
}

#[tokio::test(start_paused = true)]
async fn swapped_contacts_read_inverted() {
    let d = device("model = \"relay\"\nfaults = [{ kind = \"swapped_contacts\" }]");
    assert!(bit(&d, Area::DiscreteInput, 0).await, "open reads closed");
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(10).await;
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
    assert_eq!(
        d.peek().contact,
        Some(true),
        "peek shows the physical contact"
    );
    d.clear_all();
    assert!(bit(&d, Area::DiscreteInput, 0).await);
}

#[tokio::test(start_paused = true)]
async fn swapped_contacts_after_ms_strike_mid_command() {
    let d = device("model = \"relay\"\nfaults = [{ kind = \"swapped_contacts\", after_ms = 30 }]");
    advance_ms(100).await;
    assert!(
        !bit(&d, Area::DiscreteInput, 0).await,
        "no write yet: not counting"
    );
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(10).await;
    assert!(bit(&d, Area::DiscreteInput, 0).await);
    advance_ms(20).await;
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
}
