//! The relay's register map and its pull-in delay (docs/simulator.md).

mod common;

use closedloop_contract::{Area, Driver};
use common::*;

#[tokio::test(start_paused = true)]
async fn contact_follows_the_coil_after_pull_in() {
    let d = device(r#"model = "relay""#);
    assert_eq!(coils(&d, 0, &[true]).await, Ok(Ok(())));
    assert!(
        bit(&d, Area::Coil, 0).await,
        "the coil reads back the command at once"
    );
    assert!(
        !bit(&d, Area::DiscreteInput, 0).await,
        "the contact has not closed yet"
    );
    advance_ms(9).await;
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
    advance_ms(1).await;
    assert!(
        bit(&d, Area::DiscreteInput, 0).await,
        "closed 10 ms after the write"
    );
    assert_eq!(d.peek().contact, Some(true));

    assert_eq!(coils(&d, 0, &[false]).await, Ok(Ok(())));
    assert!(
        bit(&d, Area::DiscreteInput, 0).await,
        "still closed right after off"
    );
    advance_ms(10).await;
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
}

#[tokio::test(start_paused = true)]
async fn pull_in_ms_is_configurable() {
    let d = device("model = \"relay\"\npull_in_ms = 50");
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(49).await;
    assert!(!bit(&d, Area::DiscreteInput, 0).await);
    advance_ms(1).await;
    assert!(bit(&d, Area::DiscreteInput, 0).await);
}

#[tokio::test(start_paused = true)]
async fn without_feedback_the_contact_does_not_exist() {
    let d = device("model = \"relay\"\nfeedback = false");
    assert_eq!(read(&d, Area::DiscreteInput, 0, 1).await, exception(2));
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    assert!(bit(&d, Area::Coil, 0).await);
    advance_ms(10).await;
    assert_eq!(d.peek().contact, Some(true), "the armature still moves");
}

#[tokio::test(start_paused = true)]
async fn addresses_outside_the_map_are_exception_2() {
    let d = device(r#"model = "relay""#);
    assert_eq!(read(&d, Area::Coil, 1, 1).await, exception(2));
    assert_eq!(
        read(&d, Area::Coil, 0, 2).await,
        exception(2),
        "a block reaching past the map"
    );
    assert_eq!(read(&d, Area::DiscreteInput, 1, 1).await, exception(2));
    assert_eq!(read(&d, Area::Holding, 0, 1).await, exception(2));
    assert_eq!(read(&d, Area::Input, 0, 1).await, exception(2));
    assert_eq!(read(&d, Area::Coil, 65535, 2).await, exception(2));
    assert_eq!(coils(&d, 1, &[true]).await, exception(2));
    assert_eq!(coils(&d, 0, &[true, true]).await, exception(2));
    assert_eq!(regs(&d, 0, &[1]).await, exception(2));
    assert!(!d.peek().coils[0], "refused writes apply nothing");
}

#[tokio::test(start_paused = true)]
async fn empty_requests_are_exception_3() {
    let d = device(r#"model = "relay""#);
    assert_eq!(read(&d, Area::Coil, 0, 0).await, exception(3));
    assert_eq!(coils(&d, 0, &[]).await, exception(3));
}

#[tokio::test(start_paused = true)]
async fn describes_itself_and_clones_share_the_device() {
    let d = device(r#"model = "relay""#);
    assert_eq!(d.describe(), "sim relay");
    assert_eq!(d.request_timeout_ms(), 500);
    let twin = d.clone();
    coils(&twin, 0, &[true]).await.unwrap().unwrap();
    assert_eq!(d.peek().coils, vec![true]);
    let d = device("model = \"relay\"\ntimeout_ms = 250");
    assert_eq!(d.request_timeout_ms(), 250);
}

#[tokio::test(start_paused = true)]
async fn usable_as_a_shared_dyn_driver() {
    let d: std::sync::Arc<dyn Driver> = std::sync::Arc::new(device(r#"model = "relay""#));
    let task = tokio::spawn({
        let d = d.clone();
        async move { d.read(Area::Coil, 0, 1).await }
    });
    assert!(task.await.is_ok_and(|a| a.is_ok()));
}
