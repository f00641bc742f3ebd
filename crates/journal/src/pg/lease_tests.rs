//! Device leases on the machine's PostgreSQL: one owner at a time, epochs raised on every change
//! of owner, renewals only of unexpired leases, and a fenced write refused once its lease is
//! gone.

use super::test_db::Database;
use crate::store::fixtures::{ev, row};
use crate::{Fence, JournalError};
use std::time::Duration;

const LEASE: Duration = Duration::from_millis(300);

#[tokio::test]
async fn one_owner_at_a_time_and_the_epoch_rises_with_every_change_of_owner() {
    let Some(db) = Database::create("lease_owner").await else {
        return;
    };
    let j = db.journal().await;
    let leases = j.leases().expect("a PostgreSQL journal has leases");
    assert_eq!(leases.claim("slide", "a", LEASE).await.unwrap(), Some(1));
    assert_eq!(leases.claim("slide", "b", LEASE).await.unwrap(), None);
    // Renewing keeps the epoch; a claim under the same name (a restarted process) raises it,
    // fencing out the process before.
    let at = |epoch: i64| vec![("slide".to_string(), epoch)];
    assert_eq!(
        leases.renew("a", &at(1), LEASE).await.unwrap(),
        [("slide".to_string(), 1)]
    );
    assert!(leases.renew("b", &at(1), LEASE).await.unwrap().is_empty());
    assert_eq!(leases.claim("slide", "a", LEASE).await.unwrap(), Some(2));
    // The process that held epoch 1 under the same name renews nothing now.
    assert!(leases.renew("a", &at(1), LEASE).await.unwrap().is_empty());
    // Released, it goes to the next claimant at once, under a new epoch.
    assert!(!leases.release("slide", "a", 1).await.unwrap());
    assert!(leases.release("slide", "a", 2).await.unwrap());
    assert_eq!(leases.claim("slide", "b", LEASE).await.unwrap(), Some(3));
    // Expired, it is not renewed: it must be claimed again, and the epoch rises.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert!(leases.renew("b", &at(3), LEASE).await.unwrap().is_empty());
    assert_eq!(leases.claim("slide", "a", LEASE).await.unwrap(), Some(4));
    let all = leases.all().await.unwrap();
    assert_eq!((all[0].owner.as_str(), all[0].epoch), ("a", 4));
    assert!(all[0].expires_in_ms > 0, "{all:?}");
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_fenced_write_lands_under_its_lease_and_is_refused_once_another_owns_it() {
    let Some(db) = Database::create("lease_fence").await else {
        return;
    };
    let j = db.journal().await;
    let leases = j.leases().unwrap();
    let epoch = leases.claim("relay", "a", LEASE).await.unwrap().unwrap();
    let mut c = row("c1", "relay", "accepted", 1);
    j.insert(&c, &[ev(1, "accepted")]).await.unwrap();
    let fence = Fence {
        device: "relay".into(),
        owner: "a".into(),
        epoch,
    };
    c.dispatched = true;
    j.update_fenced(&c, &[ev(2, "dispatched")], &fence)
        .await
        .unwrap();
    // The lease lapses (a paused process) and another instance takes the device.
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert_eq!(
        leases.claim("relay", "b", LEASE).await.unwrap(),
        Some(epoch + 1)
    );
    c.status = "running".into();
    match j.update_fenced(&c, &[ev(3, "device_ack")], &fence).await {
        Err(JournalError::Fenced {
            device,
            owner,
            epoch: e,
        }) => {
            assert_eq!((device.as_str(), owner.as_str(), e), ("relay", "a", epoch));
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    let kept = j.get("c1").await.unwrap().unwrap();
    assert_eq!(kept.status, "accepted");
    let timeline: Vec<String> = j
        .events("c1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(timeline, ["accepted", "dispatched"]);
    assert!(j.verify().await.unwrap().intact());
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_fenced_insert_is_refused_once_the_lease_is_gone_and_writes_nothing() {
    let Some(db) = Database::create("lease_fenced_insert").await else {
        return;
    };
    let j = db.journal().await;
    let leases = j.leases().unwrap();
    let epoch = leases.claim("relay", "a", LEASE).await.unwrap().unwrap();
    let fence = Fence {
        device: "relay".into(),
        owner: "a".into(),
        epoch,
    };
    let first = row("c1", "relay", "accepted", 1);
    j.insert_fenced(&first, &[ev(1, "accepted")], &fence)
        .await
        .unwrap();
    // A duplicate id under a holding lease is still a duplicate.
    assert!(matches!(
        j.insert_fenced(&first, &[ev(2, "accepted")], &fence).await,
        Err(JournalError::Duplicate(_))
    ));
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    assert_eq!(
        leases.claim("relay", "b", LEASE).await.unwrap(),
        Some(epoch + 1)
    );
    let late = row("c2", "relay", "accepted", 3);
    match j.insert_fenced(&late, &[ev(3, "accepted")], &fence).await {
        Err(JournalError::Fenced {
            device, epoch: e, ..
        }) => {
            assert_eq!((device.as_str(), e), ("relay", epoch));
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(j.get("c2").await.unwrap().is_none());
    assert!(j.events("c2").await.unwrap().is_empty());
    assert_eq!(j.events("c1").await.unwrap().len(), 1);
    assert!(j.verify().await.unwrap().intact());
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn instances_are_live_while_they_beat() {
    let Some(db) = Database::create("lease_beat").await else {
        return;
    };
    let j = db.journal().await;
    let leases = j.leases().unwrap();
    leases.heartbeat("a").await.unwrap();
    leases.heartbeat("b").await.unwrap();
    assert_eq!(leases.live_instances(LEASE).await.unwrap(), ["a", "b"]);
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    leases.heartbeat("b").await.unwrap();
    assert_eq!(leases.live_instances(LEASE).await.unwrap(), ["b"]);
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_sqlite_journal_has_no_leases_and_its_fences_always_hold() {
    let j = crate::Journal::open("sqlite::memory:").await.unwrap();
    assert!(j.leases().is_none());
    let c = row("c1", "relay", "accepted", 1);
    j.insert(&c, &[ev(1, "accepted")]).await.unwrap();
    let fence = Fence {
        device: "relay".into(),
        owner: "anyone".into(),
        epoch: 9,
    };
    j.update_fenced(&c, &[ev(2, "dispatched")], &fence)
        .await
        .unwrap();
    assert_eq!(j.events("c1").await.unwrap().len(), 2);
}

#[tokio::test]
async fn published_values_are_read_only_under_their_writers_live_lease() {
    let Some(db) = Database::create("device_values").await else {
        return;
    };
    let j = db.journal().await;
    let (leases, values) = (j.leases().unwrap(), j.device_values().unwrap());
    let epoch = leases.claim("lamp", "a", LEASE).await.unwrap().unwrap();
    let state = serde_json::json!({"liveness": "online", "values": {"contact": {"value": true}}});
    values
        .publish("a", &[("lamp".into(), epoch, state.clone())])
        .await
        .unwrap();
    let read = values.read(&["lamp".into()]).await.unwrap();
    assert_eq!(
        (read.len(), &read[0].owner, &read[0].state),
        (1, &"a".to_string(), &state)
    );
    assert!(read[0].confirmed_ms_ago < 1000, "{read:?}");
    // A round with nothing changed still confirms the rows current.
    tokio::time::sleep(Duration::from_millis(200)).await;
    values.publish("a", &[]).await.unwrap();
    let again = values.read(&["lamp".into()]).await.unwrap();
    assert!(again[0].confirmed_ms_ago < 150, "{again:?}");
    // A former owner's round under an older epoch does not overwrite the row.
    let old = serde_json::json!({"liveness": "offline", "values": {}});
    values
        .publish("z", &[("lamp".into(), epoch - 1, old)])
        .await
        .unwrap();
    let kept = values.read(&["lamp".into()]).await.unwrap();
    assert_eq!((kept[0].owner.as_str(), &kept[0].state), ("a", &state));
    // Once the lease is another's (or gone), a's values are not shown as current.
    assert!(leases.release("lamp", "a", epoch).await.unwrap());
    assert!(values.read(&["lamp".into()]).await.unwrap().is_empty());
    leases.claim("lamp", "b", LEASE).await.unwrap().unwrap();
    assert!(values.read(&["lamp".into()]).await.unwrap().is_empty());
    j.close().await;
    db.drop().await;
}
