//! Faults of the link and the controller: power_off, zombie, nak, reboot, latency, drops, CRC.

mod common;

use closedloop_contract::{Area, Driver, Write};
use closedloop_sim::{Fault, FaultKind, FaultSpec};
use common::*;
use std::time::Duration;
use tokio::time::Instant;

const SLIDE: &str = "model = \"stepper\"\nspeed_mm_s = 100.0\ntravel_mm = [0.0, 300.0]";

fn with_fault(model: &str, fault: &str) -> closedloop_sim::SimDevice {
    device(&format!("{model}\nfaults = [{{ {fault} }}]"))
}

#[tokio::test(start_paused = true)]
async fn power_off_is_silent_and_de_energises() {
    let d = with_fault("model = \"relay\"", "kind = \"power_off\"");
    assert!(never_answers(d.read(Area::Coil, 0, 1)).await);
    assert!(never_answers(coils(&d, 0, &[true])).await);
    assert_eq!(
        d.peek().coils,
        vec![false],
        "a request to a dead device does nothing"
    );
    assert!(d.peek().silent);
    d.clear(FaultKind::PowerOff);
    assert_eq!(bits(&d, Area::Coil, 0, 1).await, vec![false]);
}

#[tokio::test(start_paused = true)]
async fn power_off_after_ms_drops_the_relay_and_stops_the_axis() {
    let d = with_fault("model = \"relay\"", "kind = \"power_off\", after_ms = 100");
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(50).await;
    assert!(bit(&d, Area::DiscreteInput, 0).await);
    advance_ms(50).await;
    assert!(never_answers(d.read(Area::DiscreteInput, 0, 1)).await);
    let s = d.peek();
    assert_eq!((s.coils, s.contact), (vec![false], Some(false)));

    let d = with_fault(SLIDE, "kind = \"power_off\", after_ms = 600");
    target(&d, 150.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(2000).await;
    let s = d.peek();
    assert_eq!((s.position_mm, s.moving), (Some(60.0), Some(false)));
}

#[tokio::test(start_paused = true)]
async fn zombie_is_silent_while_physics_goes_on() {
    let d = with_fault(SLIDE, "kind = \"zombie\", after_ms = 500");
    target(&d, 150.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(500).await;
    assert!(never_answers(d.read(Area::Holding, 2, 2)).await);
    assert!(
        never_answers(coils(&d, 1, &[true])).await,
        "the stop never arrives"
    );
    let s = d.peek();
    assert_eq!(
        (s.position_mm, s.moving, s.silent),
        (Some(150.0), Some(false), true)
    );
}

#[tokio::test(start_paused = true)]
async fn nak_refuses_everything_and_applies_nothing() {
    let d = with_fault("model = \"relay\"", "kind = \"nak\"");
    assert_eq!(coils(&d, 0, &[true]).await, exception(4));
    assert_eq!(read(&d, Area::Coil, 0, 1).await, exception(4));
    assert_eq!(d.peek().coils, vec![false]);

    let d = with_fault("model = \"relay\"", "kind = \"nak\", after_ms = 20");
    assert_eq!(coils(&d, 0, &[true]).await, Ok(Ok(())));
    advance_ms(19).await;
    assert!(read(&d, Area::Coil, 0, 1).await.is_ok_and(|r| r.is_ok()));
    advance_ms(1).await;
    assert_eq!(coils(&d, 0, &[false]).await, exception(4));
    assert_eq!(d.peek().coils, vec![true]);
}

#[tokio::test(start_paused = true)]
async fn reboot_is_silent_then_back_with_outputs_off() {
    let d = with_fault(SLIDE, "kind = \"reboot\", down_ms = 200, after_ms = 500");
    target(&d, 150.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(400).await;
    assert_eq!(position_raw(&d).await, 4000);
    advance_ms(150).await;
    // Down since 500 ms: silent, and what is sent now is dropped.
    let lost = d.write(Write::Registers {
        start: 0,
        values: vec![0, 30000],
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(100), lost)
            .await
            .is_err()
    );
    advance_ms(100).await; // now 750 ms: back since 700
    assert_eq!(
        position_raw(&d).await,
        5000,
        "stopped where it was when it went down"
    );
    assert_eq!(
        words(&d, Area::Holding, 0, 2).await,
        vec![0, 5000],
        "target = position"
    );
    assert_eq!(
        bits(&d, Area::DiscreteInput, 0, 2).await,
        vec![false, false]
    );
    assert!(d.faults().is_empty(), "the reboot is spent");
}

#[tokio::test(start_paused = true)]
async fn static_reboot_and_a_relay_comes_back_off() {
    let d = with_fault("model = \"relay\"", "kind = \"reboot\", down_ms = 300");
    assert!(
        tokio::time::timeout(Duration::from_millis(299), d.read(Area::Coil, 0, 1))
            .await
            .is_err()
    );
    advance_ms(1).await;
    assert_eq!(bits(&d, Area::Coil, 0, 1).await, vec![false]);

    let d = device(r#"model = "relay""#);
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    d.inject(FaultSpec::now(Fault::Reboot { down_ms: 50 }));
    advance_ms(50).await;
    assert_eq!(
        bits(&d, Area::Coil, 0, 1).await,
        vec![false],
        "the coil was dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn latency_delays_the_answer_not_the_effect() {
    let d = with_fault("model = \"relay\"", "kind = \"latency_ms\", ms = 100");
    let t0 = Instant::now();
    let mut write = d.write(Write::Coils {
        start: 0,
        values: vec![true],
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(50), &mut write)
            .await
            .is_err()
    );
    assert_eq!(d.peek().coils, vec![true], "applied on arrival");
    assert_eq!(write.await, Ok(Ok(())));
    assert_eq!(Instant::now() - t0, Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn latency_after_ms() {
    let d = with_fault(
        "model = \"relay\"",
        "kind = \"latency_ms\", ms = 80, after_ms = 10",
    );
    let t0 = Instant::now();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    assert_eq!(Instant::now(), t0, "not yet in force");
    advance_ms(10).await;
    let t1 = Instant::now();
    read(&d, Area::Coil, 0, 1).await.unwrap().unwrap();
    assert_eq!(Instant::now() - t1, Duration::from_millis(80));
}

#[tokio::test(start_paused = true)]
async fn drop_rate_one_never_answers_zero_always_does() {
    let d = with_fault("model = \"relay\"", "kind = \"drop_rate\", p = 1.0");
    for _ in 0..5 {
        assert!(never_answers(coils(&d, 0, &[true])).await);
    }
    assert_eq!(d.peek().coils, vec![false], "lost requests are not applied");

    let d = with_fault("model = \"relay\"", "kind = \"drop_rate\", p = 0.0");
    for _ in 0..100 {
        assert!(read(&d, Area::Coil, 0, 1).await.is_ok());
    }
}

#[tokio::test(start_paused = true)]
async fn drop_rate_is_deterministic_and_after_ms_counts() {
    async fn pattern(d: &closedloop_sim::SimDevice) -> Vec<bool> {
        let mut lost = Vec::new();
        for _ in 0..20 {
            let r = tokio::time::timeout(Duration::from_millis(10), d.read(Area::Coil, 0, 1)).await;
            lost.push(r.is_err());
        }
        lost
    }
    let a = with_fault(
        "model = \"relay\"\nseed = 11",
        "kind = \"drop_rate\", p = 0.5",
    );
    let b = with_fault(
        "model = \"relay\"\nseed = 11",
        "kind = \"drop_rate\", p = 0.5",
    );
    let pa = pattern(&a).await;
    assert_eq!(pa, pattern(&b).await);
    assert!(pa.contains(&true) && pa.contains(&false), "{pa:?}");

    let d = with_fault(
        "model = \"relay\"",
        "kind = \"drop_rate\", p = 1.0, after_ms = 30",
    );
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(30).await;
    assert!(never_answers(d.read(Area::Coil, 0, 1)).await);
}

#[tokio::test(start_paused = true)]
async fn crc_error_applies_the_request_but_fails_the_answer() {
    let d = with_fault("model = \"relay\"", "kind = \"crc_error\"");
    assert_eq!(coils(&d, 0, &[true]).await, crc());
    assert_eq!(d.peek().coils, vec![true], "the write took effect");
    assert_eq!(read(&d, Area::Coil, 0, 1).await, crc());

    let d = with_fault("model = \"relay\"", "kind = \"crc_error\", after_ms = 5");
    assert_eq!(coils(&d, 0, &[true]).await, Ok(Ok(())));
    advance_ms(5).await;
    assert_eq!(coils(&d, 0, &[false]).await, crc());
    assert_eq!(d.peek().coils, vec![false]);
}

/// `read_now` gives the answer `read` gives, at once, and gives none while a fault would
/// silence, lose, delay or corrupt the read: those stay `read`'s to apply.
#[tokio::test(start_paused = true)]
async fn read_now_answers_as_read_does_unless_a_fault_must_be_waited_out() {
    let d = device("model = \"relay\"");
    assert!(d.answers_at_once());
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(50).await;
    let now = d
        .read_now(Area::DiscreteInput, 0, 1)
        .expect("answered at once");
    let later = d.read(Area::DiscreteInput, 0, 1).await;
    assert_eq!(now, later);
    assert_eq!(now, Ok(Ok(closedloop_contract::Data::Bits(vec![true]))));
    for fault in [
        Fault::PowerOff,
        Fault::Zombie,
        Fault::LatencyMs { ms: 5 },
        Fault::DropRate { p: 0.5 },
        Fault::CrcError,
    ] {
        d.inject(FaultSpec::now(fault));
        assert_eq!(d.read_now(Area::DiscreteInput, 0, 1), None, "{fault:?}");
        d.clear_all();
    }
    d.inject(FaultSpec::now(Fault::Nak));
    let refused = d
        .read_now(Area::DiscreteInput, 0, 1)
        .expect("a refusal is an answer");
    assert_eq!(
        refused,
        Ok(Err(closedloop_contract::Exception::SERVER_DEVICE_FAILURE))
    );
}
