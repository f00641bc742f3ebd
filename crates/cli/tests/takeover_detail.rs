//! What a surviving gateway says of a command it took over (`CLOSEDLOOP_PG_URL`): two `closedloop
//! serve` processes on one PostgreSQL journal over the Modbus workshop `closedloop sim` serves.
//! The slide's owner is killed mid-move and the slide is stopped short by a Modbus write made
//! here, byte by byte, as a person at the panel would: the survivor ends the move `failed
//! INTERRUPTED` saying it took the device over from the dead gateway — not "the gateway
//! restarted", which it did not.

mod common;

use common::gateways::{
    acked_in_journal, call, gateway, owned_by, settled_owner, signal, start_sim,
};
use common::pg::Database;
use common::truth::{slide_at_rest, slide_beyond};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Writes coil `coil` of `unit` to true (Modbus function 5), byte by byte.
async fn press(addr: &str, unit: u8, coil: u16) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let [ch, cl] = coil.to_be_bytes();
    s.write_all(&[0, 9, 0, 0, 0, 6, unit, 5, ch, cl, 0xFF, 0])
        .await
        .unwrap();
    let mut answer = [0u8; 12];
    s.read_exact(&mut answer).await.unwrap();
    assert_eq!(answer[7], 5, "a Modbus exception: {answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_taken_over_from_a_killed_gateway_says_whose_it_was_not_that_the_gateway_restarted()
{
    let Some(db) = Database::create("takeover_words").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let owner = settled_owner(&a_at, &b_at, "slide").await;
    let (doomed, doomed_at, survivor, survivor_at) = match owner.as_str() {
        "a" => (&mut a, &a_at, "b", &b_at),
        _ => (&mut b, &b_at, "a", &a_at),
    };
    let started = call(
        doomed_at,
        "slide_move_to",
        r#"{"target_mm":250,"wait_s":0}"#,
    )
    .await;
    let id = started["command_id"].as_str().unwrap().to_string();
    slide_beyond(&modbus, 20.0).await;
    acked_in_journal(survivor_at, &id).await;
    signal(doomed, "-KILL");
    let _ = doomed.wait();
    // The slide's stop button (coil 1), pressed while nobody drives it.
    press(&modbus, 2, 1).await;
    let stood = slide_at_rest(&modbus).await;
    assert!(stood < 240.0, "the slide went on to {stood} mm");
    owned_by(survivor_at, "slide", Some(survivor)).await;
    let mut end = Value::Null;
    for _ in 0..10 {
        let args = format!(r#"{{"command_id":"{id}","wait_s":5}}"#);
        end = call(survivor_at, "get_command_status", &args).await;
        if end["status"] != "running" && end["status"] != "accepted" {
            break;
        }
    }
    assert_eq!(
        (end["status"].as_str(), end["error_code"].as_str()),
        (Some("failed"), Some("INTERRUPTED")),
        "{end}"
    );
    let detail = end["detail"].as_str().unwrap_or_default();
    let from = format!(
        "Gateway {owner}, which ran this command, stopped while it ran, and gateway {survivor} \
         took the device over; fresh reads since show slide standing still short"
    );
    assert!(detail.starts_with(&from), "{detail}");
    assert!(!detail.contains("restart"), "{detail}");
    assert!(detail.contains("standing still short"), "{detail}");
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}
