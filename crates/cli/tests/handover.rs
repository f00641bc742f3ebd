//! One endpoint, any gateway (`CLOSEDLOOP_PG_URL`): two `closedloop serve` processes on one
//! PostgreSQL journal over the Modbus workshop `closedloop sim` serves. A call to the gateway
//! that does not drive the device is accepted there and taken over by the owner, whose
//! admission checks still hold (a refusal ends the command `failed` with the code, nothing
//! written); and a command queued behind a move moves with the device when its owner is killed.
//! Ground truth is read from the simulator's registers with Modbus requests written here.

mod common;

use common::gateways::{
    acked_in_journal, call, entry, gateway, gateway_on, owned_by, settled_owner, signal, start_sim,
    wait_for,
};
use common::pg::Database;
use common::truth::{modbus_read, slide_beyond, slide_mm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_call_the_owner_refuses_ends_failed_with_its_code_and_nothing_written() {
    let Some(db) = Database::create("handed_refused").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let gripper_owner = settled_owner(&a_at, &b_at, "gripper").await;
    let other_at = if gripper_owner == "a" { &b_at } else { &a_at };
    // The slide moves (0 → 250 mm, about 2.5 s): the gripper's `requires` does not hold.
    let moving = call(&a_at, "slide_move_to", r#"{"target_mm":250,"wait_s":0}"#).await;
    assert_eq!(moving["status"], "accepted", "{moving}");
    slide_beyond(&modbus, 20.0).await;
    let r = call(other_at, "gripper_close", r#"{"wait_s":5}"#).await;
    assert_eq!(
        (r["status"].as_str(), r["error_code"].as_str()),
        (Some("failed"), Some("INTERLOCK")),
        "{r}"
    );
    assert_eq!(entry(&r, "accepted")["handed_to"], gripper_owner.as_str());
    assert_eq!(entry(&r, "claimed")["by"], gripper_owner.as_str(), "{r}");
    assert!(entry(&r, "dispatched").is_null(), "{r}");
    let detail = r["detail"].as_str().unwrap();
    assert!(detail.contains("devices.slide.moving"), "{r}");
    assert_eq!(
        modbus_read(&modbus, 3, 2, 0, 1).await[0] & 1,
        0,
        "the gripper closed while the slide moved"
    );
    let moved = call(
        &a_at,
        "get_command_status",
        &wait_for(moving["command_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(moved["status"], "completed", "{moved}");
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// Two gateways; the slide's owner moves it 0 → 250 mm (about 2.5 s) and queues a move to
/// 100 mm behind it, accepted there and never handed, then is killed mid-move. `queue_timeout_s`
/// of the move, when given, is written into the plant first.
struct Queued {
    _dir: tempfile::TempDir,
    _sim: common::Running,
    modbus: String,
    gateways: [std::process::Child; 2],
    survivor: &'static str,
    survivor_at: String,
    second: String,
}

async fn queued_behind_a_killed_owner(db: &Database, queue_timeout_s: Option<u32>) -> Queued {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let (sim, modbus) = start_sim(&dir, &db.url, 2);
    if let Some(t) = queue_timeout_s {
        let path = dir.join("plant.toml");
        let at = "name = \"move_to\"";
        let plant = std::fs::read_to_string(&path).unwrap();
        let plant = plant.replacen(at, &format!("{at}\nqueue_timeout_s = {t}"), 1);
        std::fs::write(&path, plant).unwrap();
    }
    let (a, a_at) = gateway(&dir, "a");
    let (b, b_at) = gateway(&dir, "b");
    let mut gateways = [a, b];
    let doomed = usize::from(settled_owner(&a_at, &b_at, "slide").await != "a");
    let ats = [a_at, b_at];
    let first = r#"{"target_mm":250,"wait_s":0}"#;
    let first = call(&ats[doomed], "slide_move_to", first).await;
    let second = r#"{"target_mm":100,"wait_s":0}"#;
    let second = call(&ats[doomed], "slide_move_to", second).await;
    assert_eq!(second["status"], "accepted", "{second}");
    slide_beyond(&modbus, 20.0).await;
    let first_id = first["command_id"].as_str().unwrap();
    acked_in_journal(&ats[1 - doomed], first_id).await;
    signal(&gateways[doomed], "-KILL");
    let _ = gateways[doomed].wait();
    let survivor = ["a", "b"][1 - doomed];
    let survivor_at = ats[1 - doomed].clone();
    owned_by(&survivor_at, "slide", Some(survivor)).await;
    let end = call(&survivor_at, "get_command_status", &wait_for(first_id)).await;
    assert_eq!(end["status"], "completed", "{end}");
    Queued {
        _dir: tmp,
        _sim: sim,
        modbus,
        gateways,
        survivor,
        survivor_at,
        second: second["command_id"].as_str().unwrap().to_string(),
    }
}

impl Queued {
    async fn end(mut self, db: Database) {
        let [a, b] = &mut self.gateways;
        common::gateways::wind_up(db, &mut [a, b]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_queued_behind_a_move_moves_with_the_device_when_its_owner_is_killed() {
    let Some(db) = Database::create("queued_moves").await else {
        return;
    };
    let q = queued_behind_a_killed_owner(&db, None).await;
    let mut end = call(&q.survivor_at, "get_command_status", &wait_for(&q.second)).await;
    if end["status"] == "accepted" || end["status"] == "running" {
        end = call(&q.survivor_at, "get_command_status", &wait_for(&q.second)).await;
    }
    assert_eq!(end["status"], "completed", "{end}");
    let claims: Vec<_> = end["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "claimed")
        .map(|e| e["by"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(claims, [q.survivor], "{end}");
    assert!(entry(&end, "accepted")["handed_to"].is_null(), "{end}");
    let at = slide_mm(&q.modbus).await;
    assert!((at - 100.0).abs() < 0.5, "the slide is at {at} mm, not 100");
    q.end(db).await;
}

/// A queued command moves with its device only within its queue wait: one that waited longer
/// than `queue_timeout_s` while the lease changed hands ends `timeout`, never sent late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_command_whose_wait_ran_out_during_the_takeover_ends_timeout_unsent() {
    let Some(db) = Database::create("queued_expired").await else {
        return;
    };
    let q = queued_behind_a_killed_owner(&db, Some(1)).await;
    let end = call(&q.survivor_at, "get_command_status", &wait_for(&q.second)).await;
    assert_eq!(
        (end["status"].as_str(), end["error_code"].as_str()),
        (Some("timeout"), Some("TIMEOUT")),
        "{end}"
    );
    assert_eq!(entry(&end, "claimed")["by"], q.survivor, "{end}");
    assert!(entry(&end, "dispatched").is_null(), "{end}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mm = slide_mm(&q.modbus).await;
    assert!((mm - 250.0).abs() < 0.5, "the slide is at {mm} mm, not 250");
    q.end(db).await;
}

/// `cancel_command` is honest from any gateway: sent to the one that does not run the move, it
/// is kept on the command's timeline, announced to the one that runs it, which writes the stop;
/// the answer is the cancelled command, and the slide stands short of its target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_cancelled_through_the_gateway_that_does_not_run_it_stops_short() {
    let Some(db) = Database::create("cancel_elsewhere").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let (owner_at, other, other_at) = match settled_owner(&a_at, &b_at, "slide").await.as_str() {
        "a" => (&a_at, "b", &b_at),
        _ => (&b_at, "a", &a_at),
    };
    let moving = call(owner_at, "slide_move_to", r#"{"target_mm":250,"wait_s":0}"#).await;
    slide_beyond(&modbus, 20.0).await;
    let id = moving["command_id"].as_str().unwrap();
    let cancel = format!(r#"{{"command_id":"{id}","wait_s":5}}"#);
    let r = call(other_at, "cancel_command", &cancel).await;
    assert_eq!(r["status"], "cancelled", "{r}");
    assert_eq!(entry(&r, "cancel_requested")["gateway"], other, "{r}");
    assert!(
        !entry(&r, "cancel_sent").is_null(),
        "no stop was written: {r}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mm = slide_mm(&modbus).await;
    assert!(mm < 240.0, "the slide went on to {mm} mm");
    assert_eq!(
        modbus_read(&modbus, 2, 2, 0, 1).await[0] & 1,
        0,
        "still moving"
    );
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// A cancel announced while the owner is not listening (its listening session ended by the
/// server, as a dropped link would; the owner listens again 200 ms later) is read from the
/// timeline once it listens again: the slide still stops short. Without that catch-up the
/// request is lost and the move runs on to 250 mm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_announced_while_the_owner_was_not_listening_still_stops_the_slide() {
    let Some(db) = Database::create("cancel_unheard").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    // Each gateway's sessions carry its name, so the test can end the owner's listening one.
    let plant = std::fs::read_to_string(dir.path().join("plant.toml")).unwrap();
    let mut started = Vec::new();
    for name in ["a", "b"] {
        let named = format!("{}?application_name=gw_{name}", db.url);
        let own = dir.path().join(format!("plant_{name}.toml"));
        std::fs::write(&own, plant.replace(&db.url, &named)).unwrap();
        started.push(gateway_on(&own, name));
    }
    let [(mut a, a_at), (mut b, b_at)] = <[_; 2]>::try_from(started).unwrap();
    let owner = settled_owner(&a_at, &b_at, "slide").await;
    let (owner_at, other_at) = if owner == "a" {
        (&a_at, &b_at)
    } else {
        (&b_at, &a_at)
    };
    let moving = call(owner_at, "slide_move_to", r#"{"target_mm":250,"wait_s":0}"#).await;
    slide_beyond(&modbus, 20.0).await;
    let deafen = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = 'gw_{owner}' AND query LIKE 'LISTEN%'"
    );
    common::pg::sql(&db.url, &deafen).await;
    let id = moving["command_id"].as_str().unwrap();
    let cancel = format!(r#"{{"command_id":"{id}","wait_s":8}}"#);
    let r = call(other_at, "cancel_command", &cancel).await;
    assert_eq!(r["status"], "cancelled", "{r}");
    assert!(
        !entry(&r, "cancel_sent").is_null(),
        "no stop was written: {r}"
    );
    let mm = slide_mm(&modbus).await;
    assert!(mm < 240.0, "the slide went on to {mm} mm");
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// Gap (d) of the first scale-out review: devices whose actions share an exclusive group must be
/// driven by one gateway, or the group is not exclusive across gateways. Two devices that the
/// per-device placement splits between `a` and `b` are put in one group; both gateways then
/// report one owner for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_of_one_exclusive_group_are_driven_by_one_gateway() {
    let Some(db) = Database::create("one_cell").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, _modbus) = start_sim(dir.path(), &db.url, 2);
    let actions = [
        ("lamp", "switch"),
        ("slide", "move_to"),
        ("gripper", "close"),
        ("oven", "set_temperature"),
    ];
    let gateways = ["a".to_string(), "b".to_string()];
    let alone = |d: &str| closedloop_engine::ownership::rendezvous(d, &gateways).cloned();
    let (first, second) = actions
        .iter()
        .flat_map(|x| actions.iter().map(move |y| (x, y)))
        .find(|(x, y)| alone(x.0) != alone(y.0))
        .expect("the per-device placement splits some pair");
    let path = dir.path().join("plant.toml");
    let mut plant = std::fs::read_to_string(&path).unwrap();
    for (_, action) in [first, second] {
        let at = format!("name = \"{action}\"");
        plant = plant.replacen(&at, &format!("{at}\nexclusive = \"cell\""), 1);
    }
    std::fs::write(&path, plant).unwrap();
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let one = settled_owner(&a_at, &b_at, first.0).await;
    let other = settled_owner(&a_at, &b_at, second.0).await;
    assert_eq!(one, other, "{} and {} are driven apart", first.0, second.0);
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// A device only one gateway reaches (`gateways = ["a"]`; b's plant points it at a port nothing
/// listens on, as a serial line on another machine would be): b shows a's reads of it, naming a
/// (`read_by`), and follows them as the lamp switches; a call sent to b is handed to a and
/// switches the lamp; once a is killed, b no longer shows a's values as current but its own
/// view, offline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_one_gateway_reaches_shows_the_owners_values_elsewhere_and_is_run_there() {
    let Some(db) = Database::create("one_reaches").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let path = dir.path().join("plant.toml");
    let plant = std::fs::read_to_string(&path).unwrap();
    let only_a = plant.replacen("id = \"lamp\"", "id = \"lamp\"\ngateways = [\"a\"]", 1);
    std::fs::write(&path, &only_a).unwrap();
    let closed = common::gateways::closed_address();
    let lamp_at = format!("address = \"{modbus}\"");
    let unreachable = only_a.replacen(&lamp_at, &format!("address = \"{closed}\""), 1);
    std::fs::write(dir.path().join("plant_b.toml"), unreachable).unwrap();
    let (mut a, _) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway_on(&dir.path().join("plant_b.toml"), "b");
    owned_by(&b_at, "lamp", Some("a")).await;

    let state = lamp_at_b(&b_at, |s| s["read_by"] == "a").await;
    assert_eq!(
        (
            state["liveness"].as_str(),
            state["signals"]["contact"]["value"].as_bool()
        ),
        (Some("online"), Some(false)),
        "{state}"
    );
    // Never younger than it is: at least the lamp's poll period (20 ms) old.
    assert!(
        state["signals"]["contact"]["age_ms"].as_i64() >= Some(20),
        "{state}"
    );
    let listed = call(&b_at, "list_devices", "{}").await;
    let lamp = &listed["devices"].as_array().unwrap()[0];
    assert_eq!(
        (lamp["device"].as_str(), lamp["liveness"].as_str()),
        (Some("lamp"), Some("online")),
        "{listed}"
    );
    let done = call(&b_at, "lamp_switch", r#"{"on":true,"wait_s":5}"#).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(entry(&done, "accepted")["handed_to"], "a", "{done}");
    assert_eq!(entry(&done, "claimed")["by"], "a", "{done}");
    assert_eq!(
        modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1,
        1,
        "the contact did not move"
    );
    // b follows a's reads: the contact on, as the simulator has it.
    lamp_at_b(&b_at, |s| s["signals"]["contact"]["value"] == true).await;
    // The owner gone, its values are not shown as current: b shows its own view, offline.
    signal(&a, "-KILL");
    lamp_at_b(&b_at, |s| {
        s["read_by"].is_null() && s["liveness"] == "offline"
    })
    .await;
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// b's `get_device_state` of the lamp once `until` holds (bounded: 15 s).
async fn lamp_at_b(b_at: &str, until: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let mut state = serde_json::Value::Null;
    for _ in 0..150 {
        state = call(b_at, "get_device_state", r#"{"device":"lamp"}"#).await;
        if until(&state) {
            return state;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("b's view of the lamp never came to that: {state}");
}
