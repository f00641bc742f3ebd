//! Run-time control of faults: inject, clear, list, and when injected faults start counting.

mod common;

use closedloop_contract::Area;
use closedloop_sim::{Fault, FaultConfig, FaultKind, FaultSpec};
use common::*;

#[tokio::test(start_paused = true)]
async fn injected_after_ms_counts_from_the_first_write_when_none_happened() {
    let d = device(r#"model = "relay""#);
    d.inject(FaultSpec::after(Fault::Nak, 100));
    advance_ms(500).await;
    assert!(
        read(&d, Area::Coil, 0, 1).await.is_ok_and(|r| r.is_ok()),
        "no write yet"
    );
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(99).await;
    assert!(read(&d, Area::Coil, 0, 1).await.is_ok_and(|r| r.is_ok()));
    advance_ms(1).await;
    assert_eq!(read(&d, Area::Coil, 0, 1).await, exception(4));
}

#[tokio::test(start_paused = true)]
async fn injected_after_ms_counts_from_the_injection_after_a_write() {
    let d = device(r#"model = "relay""#);
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(1000).await;
    d.inject(FaultSpec::after(Fault::CrcError, 40));
    advance_ms(39).await;
    assert!(read(&d, Area::Coil, 0, 1).await.is_ok());
    advance_ms(1).await;
    assert_eq!(read(&d, Area::Coil, 0, 1).await, crc());
}

#[tokio::test(start_paused = true)]
async fn faults_lists_clear_and_clear_all() {
    let d = device(
        "model = \"relay\"\nfaults = [{ kind = \"nak\" }, { kind = \"latency_ms\", ms = 5 }]",
    );
    assert_eq!(
        d.faults(),
        vec![
            FaultSpec::now(Fault::Nak),
            FaultSpec::now(Fault::LatencyMs { ms: 5 })
        ]
    );
    d.clear(FaultKind::Nak);
    assert_eq!(d.faults(), vec![FaultSpec::now(Fault::LatencyMs { ms: 5 })]);
    d.inject(FaultSpec::now(Fault::LatencyMs { ms: 7 }));
    assert_eq!(
        d.faults(),
        vec![FaultSpec::now(Fault::LatencyMs { ms: 7 })],
        "same kind replaces"
    );
    d.inject(FaultSpec::now(Fault::PowerOff));
    d.clear_all();
    assert!(d.faults().is_empty());
    assert!(!d.peek().silent);
    assert_eq!(
        read(&d, Area::Coil, 0, 1).await,
        Ok(Ok(closedloop_contract::Data::Bits(vec![false])))
    );
}

#[tokio::test(start_paused = true)]
async fn try_inject_checks_like_the_plant_file() {
    let d = device(r#"model = "relay""#);
    let e = d
        .try_inject(FaultSpec::now(Fault::Stall { at_mm: None }))
        .unwrap_err();
    assert_eq!(e.key(), "fault.kind");
    let e = d
        .try_inject(FaultSpec::now(Fault::DropRate { p: 2.0 }))
        .unwrap_err();
    assert_eq!(e.key(), "fault.p");
    assert!(d.faults().is_empty());
    let cfg = FaultConfig {
        kind: "brownout".into(),
        ..FaultConfig::default()
    };
    assert_eq!(d.inject_config(&cfg), Ok(()));
    assert_eq!(d.faults(), vec![FaultSpec::now(Fault::Brownout)]);
}
