//! Three gateways on one PostgreSQL journal (`CLOSEDLOOP_PG_URL`), driving the Modbus workshop
//! that `closedloop sim` serves: every device settles on the one owner rendezvous hashing picks
//! among the three, and all three gateways report it; a lamp call sent to either gateway that does
//! not own the lamp is handed to the owner, claimed and run by it; the lamp's owner `kill -9`ed,
//! exactly one survivor takes the lamp (the one the hashing picks among the two) and the other
//! survivor hands it its calls; and a move handed through one gateway to another that is killed
//! mid-way completes under the third, which recovers it. Ground truth is read from the
//! simulator's registers with Modbus requests written here.

mod common;

use closedloop_engine::ownership::rendezvous;
use common::gateways::{acked_in_journal, call, entry, gateway, signal, start_sim, wait_for};
use common::pg::{Database, scalar};
use common::truth::{modbus_read, slide_beyond, slide_mm};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Child;
use std::time::{Duration, Instant};

const NAMES: [&str; 3] = ["a", "b", "c"];
const DEVICES: [&str; 4] = ["lamp", "slide", "gripper", "oven"];

/// The simulator and gateways `a`, `b` and `c` serving its plant with `lease_s = 2`.
struct Three {
    _dir: tempfile::TempDir,
    _sim: common::Running,
    modbus: String,
    children: Vec<Child>,
    ats: Vec<String>,
}

fn three_up(db: &Database) -> Three {
    let dir = tempfile::tempdir().unwrap();
    let (sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (children, ats) = NAMES.iter().map(|n| gateway(dir.path(), n)).unzip();
    Three {
        _dir: dir,
        _sim: sim,
        modbus,
        children,
        ats,
    }
}

impl Three {
    fn at(&self, name: &str) -> &str {
        &self.ats[NAMES.iter().position(|n| *n == name).unwrap()]
    }

    fn ats_of(&self, names: &[&str]) -> Vec<&str> {
        names.iter().map(|n| self.at(n)).collect()
    }

    fn kill(&mut self, name: &str) {
        let child = &mut self.children[NAMES.iter().position(|n| *n == name).unwrap()];
        signal(child, "-KILL");
        let _ = child.wait();
    }

    async fn end(mut self, db: Database) {
        let [a, b, c] = self.children.as_mut_slice() else {
            unreachable!()
        };
        common::gateways::wind_up(db, &mut [a, b, c]).await;
    }
}

/// The gateway rendezvous hashing places `device` on among `live`.
fn placed(device: &str, live: &[&str]) -> String {
    let live: Vec<String> = live.iter().map(|s| s.to_string()).collect();
    rendezvous(device, &live).unwrap().clone()
}

/// `(owner, epoch)` of `device` as the gateway at `host_port` reports it.
async fn holder(host_port: &str, device: &str) -> (Option<String>, Option<i64>) {
    let args = format!(r#"{{"device":"{device}"}}"#);
    let state = call(host_port, "get_device_state", &args).await;
    (
        state["owner"].as_str().map(str::to_string),
        state["epoch"].as_i64(),
    )
}

/// Waits (at most 20 s) until every gateway at `ats` reports `want` as `device`'s owner under
/// one epoch, and still does a second later; that epoch, and every owner reported meanwhile.
async fn all_report(ats: &[&str], device: &str, want: &str) -> (i64, BTreeSet<Option<String>>) {
    let mut seen = BTreeSet::new();
    let mut agreed: Option<(i64, Instant)> = None;
    for _ in 0..200 {
        let mut now = Vec::new();
        for at in ats {
            now.push(holder(at, device).await);
        }
        seen.extend(now.iter().map(|(o, _)| o.clone()));
        let epoch = now[0].1;
        let one = now
            .iter()
            .all(|h| h.0.as_deref() == Some(want) && h.1 == epoch);
        match (one, epoch, agreed) {
            (true, Some(e), Some((was, since))) if was == e => {
                if since.elapsed() >= Duration::from_secs(1) {
                    return (e, seen);
                }
            }
            (true, Some(e), _) => agreed = Some((e, Instant::now())),
            _ => agreed = None,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{device}: {ats:?} never all reported {want} (seen {seen:?})");
}

/// The lamp's contact (discrete input 0 of unit 1) and commanded coil (coil 0), as the
/// simulator holds them.
async fn lamp(modbus: &str) -> (u8, u8) {
    let contact = modbus_read(modbus, 1, 2, 0, 1).await[0] & 1;
    let coil = modbus_read(modbus, 1, 1, 0, 1).await[0] & 1;
    (contact, coil)
}

/// A `lamp_switch` sent to `at`, a gateway that does not own the lamp: it completes, handed to
/// and claimed by `owner`, and the simulator's relay really switched.
async fn switch_through(t: &Three, at: &str, owner: &str, on: bool) {
    let done = call(at, "lamp_switch", &format!(r#"{{"on":{on},"wait_s":5}}"#)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(entry(&done, "accepted")["handed_to"], owner, "{done}");
    assert_eq!(entry(&done, "claimed")["by"], owner, "{done}");
    let want = u8::from(on);
    assert_eq!(
        lamp(&t.modbus).await,
        (want, want),
        "the relay did not switch"
    );
}

/// Every device ends up held by the gateway rendezvous hashing picks among `a`, `b` and `c`,
/// all three report it under one epoch, and that is the unexpired lease in the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_device_settles_on_the_one_owner_all_three_gateways_report() {
    let Some(db) = Database::create("three_owners").await else {
        return;
    };
    let t = three_up(&db);
    for device in DEVICES {
        let owner = placed(device, &NAMES);
        let (epoch, _) = all_report(&t.ats_of(&NAMES), device, &owner).await;
        let lease = format!(
            "SELECT count(*) FROM leases WHERE device = '{device}' AND owner = '{owner}'
             AND epoch = {epoch} AND expires_at > now()"
        );
        assert_eq!(
            scalar(&db.url, &lease).await,
            1,
            "{device}: {owner}/{epoch}"
        );
    }
    t.end(db).await;
}

/// A switch sent to either gateway that does not own the lamp is accepted there, handed to the
/// owner, claimed by it and completed: on through one, off through the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lamp_call_to_either_non_owner_is_claimed_and_run_by_the_owner() {
    let Some(db) = Database::create("three_handed").await else {
        return;
    };
    let t = three_up(&db);
    let owner = placed("lamp", &NAMES);
    all_report(&t.ats_of(&NAMES), "lamp", &owner).await;
    let others: Vec<&str> = NAMES.into_iter().filter(|n| *n != owner).collect();
    switch_through(&t, t.at(others[0]), &owner, true).await;
    switch_through(&t, t.at(others[1]), &owner, false).await;
    t.end(db).await;
}

/// After the lamp's owner is `kill -9`ed, both survivors report one new owner — the one the
/// hashing picks among them — under a later epoch; neither ever reports the other survivor, and
/// a switch sent to that other survivor is handed to the new owner and run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_survivor_takes_the_killed_owners_lamp_and_the_other_hands_it_calls() {
    let Some(db) = Database::create("three_kill").await else {
        return;
    };
    let mut t = three_up(&db);
    let dead = placed("lamp", &NAMES);
    let (old_epoch, _) = all_report(&t.ats_of(&NAMES), "lamp", &dead).await;
    t.kill(&dead);
    let survivors: Vec<&str> = NAMES.into_iter().filter(|n| *n != dead).collect();
    let heir = placed("lamp", &survivors);
    let other = *survivors.iter().find(|n| **n != heir).unwrap();
    let (epoch, seen) = all_report(&t.ats_of(&survivors), "lamp", &heir).await;
    assert!(
        epoch > old_epoch,
        "the lamp's epoch went {old_epoch} → {epoch}"
    );
    assert!(!seen.contains(&Some(other.to_string())), "{seen:?}");
    switch_through(&t, t.at(other), &heir, true).await;
    t.end(db).await;
}

/// A move to 250 mm (about 2.5 s) is sent to a gateway that neither owns the slide nor will:
/// handed to the owner, which runs it and is `kill -9`ed past 20 mm. The gateway the hashing
/// picks among the survivors takes the slide, recovers the move and judges it on its own reads:
/// both survivors answer `completed`, and the slide stands at 250 mm, stopped, no fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_move_whose_owner_is_killed_mid_way_completes_under_the_third_gateway() {
    let Some(db) = Database::create("three_mid_move").await else {
        return;
    };
    let mut t = three_up(&db);
    let owner = placed("slide", &NAMES);
    all_report(&t.ats_of(&NAMES), "slide", &owner).await;
    let survivors: Vec<&str> = NAMES.into_iter().filter(|n| *n != owner).collect();
    let heir = placed("slide", &survivors);
    let via = *survivors.iter().find(|n| **n != heir).unwrap();
    let args = r#"{"target_mm":250,"wait_s":0}"#;
    let started = call(t.at(via), "slide_move_to", args).await;
    assert_eq!(started["status"], "accepted", "{started}");
    assert_eq!(entry(&started, "accepted")["handed_to"], owner.as_str());
    slide_beyond(&t.modbus, 20.0).await;
    let id = started["command_id"].as_str().unwrap();
    acked_in_journal(t.at(via), id).await;
    t.kill(&owner);
    let at_kill = slide_mm(&t.modbus).await;
    assert!(
        at_kill < 240.0,
        "the move was over before the kill: {at_kill} mm"
    );
    all_report(&t.ats_of(&survivors), "slide", &heir).await;
    let end = call(t.at(&heir), "get_command_status", &wait_for(id)).await;
    let seen_by_via = call(t.at(via), "get_command_status", &wait_for(id)).await;
    assert_eq!(seen_by_via, end, "the survivors disagree");
    assert_eq!(
        (&end["status"], &end["error_code"]),
        (&"completed".into(), &Value::Null),
        "{end}"
    );
    assert_eq!(entry(&end, "claimed")["by"], owner.as_str(), "{end}");
    assert_eq!(entry(&end, "recovered")["by"], heir.as_str(), "{end}");
    let times: Vec<&str> = end["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["at"].as_str().unwrap())
        .collect();
    assert!(
        times.is_sorted(),
        "the timeline is out of time order: {end}"
    );
    let mm = slide_mm(&t.modbus).await;
    assert!(
        (mm - 250.0).abs() <= 0.2,
        "completed, but the slide is at {mm} mm"
    );
    let inputs = modbus_read(&t.modbus, 2, 2, 0, 2).await[0];
    assert_eq!(
        inputs & 0b11,
        0,
        "the slide still moves or is faulted: {inputs:#b}"
    );
    t.end(db).await;
}
