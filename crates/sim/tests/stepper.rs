//! The stepper's register map and motion (docs/simulator.md).

mod common;

use closedloop_contract::Area;
use common::*;

const SLIDE: &str = "model = \"stepper\"\nspeed_mm_s = 100.0\ntravel_mm = [0.0, 300.0]";

#[tokio::test(start_paused = true)]
async fn moves_at_speed_and_reports_moving_from_the_start_instant() {
    let d = device(SLIDE);
    assert_eq!(position_raw(&d).await, 0);
    assert_eq!(target(&d, 150.0).await, Ok(Ok(())));
    assert!(
        !bit(&d, Area::DiscreteInput, 0).await,
        "a target alone does not move the axis"
    );
    assert_eq!(coils(&d, 0, &[true]).await, Ok(Ok(())));
    assert!(
        bit(&d, Area::DiscreteInput, 0).await,
        "moving in the same instant as the start"
    );
    assert_eq!(
        bits(&d, Area::Coil, 0, 3).await,
        vec![false; 3],
        "command coils self-clear"
    );
    advance_ms(500).await;
    assert_eq!(position_raw(&d).await, 5000);
    advance_ms(999).await;
    assert!(bit(&d, Area::DiscreteInput, 0).await);
    advance_ms(1).await;
    assert_eq!(position_raw(&d).await, 15000);
    assert_eq!(
        bits(&d, Area::DiscreteInput, 0, 2).await,
        vec![false, false]
    );
    let s = d.peek();
    assert_eq!(
        (s.position_mm, s.target_mm, s.moving),
        (Some(150.0), Some(150.0), Some(false))
    );
}

#[tokio::test(start_paused = true)]
async fn moves_backward_and_holding_block_reads_target_then_position() {
    let d = device(SLIDE);
    target(&d, 100.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(1000).await;
    target(&d, 20.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(300).await;
    assert_eq!(words(&d, Area::Holding, 0, 4).await, vec![0, 2000, 0, 7000]);
    advance_ms(500).await;
    assert_eq!(position_raw(&d).await, 2000);
}

#[tokio::test(start_paused = true)]
async fn a_target_outside_travel_is_refused_and_not_applied() {
    let d = device(SLIDE);
    target(&d, 120.0).await.unwrap().unwrap();
    assert_eq!(target(&d, 300.01).await, exception(3));
    assert_eq!(target(&d, -0.01).await, exception(3));
    assert_eq!(
        regs(&d, 0, &[1]).await,
        exception(3),
        "a high word alone leaving travel"
    );
    assert_eq!(words(&d, Area::Holding, 0, 2).await, vec![0, 12000]);
    assert_eq!(
        regs(&d, 1, &[30000]).await,
        Ok(Ok(())),
        "the low word alone is fine"
    );
    assert_eq!(d.peek().target_mm, Some(300.0));
}

#[tokio::test(start_paused = true)]
async fn position_is_read_only_and_the_map_ends_where_it_ends() {
    let d = device(SLIDE);
    assert_eq!(regs(&d, 2, &[0, 100]).await, exception(2));
    assert_eq!(regs(&d, 0, &[0, 100, 0, 100]).await, exception(2));
    assert_eq!(
        d.peek().target_mm,
        Some(0.0),
        "nothing of a refused block is applied"
    );
    assert_eq!(regs(&d, 4, &[1]).await, exception(2));
    assert_eq!(coils(&d, 3, &[true]).await, exception(2));
    assert_eq!(read(&d, Area::Holding, 0, 5).await, exception(2));
    assert_eq!(read(&d, Area::DiscreteInput, 2, 1).await, exception(2));
    assert_eq!(read(&d, Area::Coil, 3, 1).await, exception(2));
    assert_eq!(read(&d, Area::Input, 0, 1).await, exception(2));
}

#[tokio::test(start_paused = true)]
async fn stop_holds_the_current_position() {
    let d = device(SLIDE);
    target(&d, 150.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(420).await;
    coils(&d, 1, &[true]).await.unwrap().unwrap();
    advance_ms(1000).await;
    assert_eq!(position_raw(&d).await, 4200);
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(1080).await;
    assert_eq!(
        position_raw(&d).await,
        15000,
        "a new start resumes toward the target"
    );
}

#[tokio::test(start_paused = true)]
async fn the_target_is_latched_at_start() {
    let d = device(SLIDE);
    target(&d, 100.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(200).await;
    target(&d, 50.0).await.unwrap().unwrap();
    advance_ms(800).await;
    assert_eq!(position_raw(&d).await, 10000);
}

#[tokio::test(start_paused = true)]
async fn starts_at_travel_min_unless_zero_is_inside() {
    let d = device("model = \"stepper\"\ntravel_mm = [50.0, 300.0]");
    assert_eq!(position_raw(&d).await, 5000);
    assert_eq!(
        words(&d, Area::Holding, 0, 2).await,
        vec![0, 5000],
        "target = position"
    );
    let d = device("model = \"stepper\"\ntravel_mm = [-100.0, 100.0]");
    assert_eq!(position_raw(&d).await, 0);
    target(&d, -50.0).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(500).await;
    assert_eq!(position_raw(&d).await, -5000, "negative positions as i32");
}
