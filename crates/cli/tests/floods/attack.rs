//! What every flood test does around its attack (`floods.rs`, `floods_round_two.rs`): the
//! tokens, a slide set moving, the operator's cancel under the attack (its latency a figure,
//! appended to `$CARGO_TARGET_TMPDIR/floods.txt`, which `.ci/run` empties before the tests and
//! shows after them), and connections that say nothing.

#![allow(dead_code)]

use super::client::{Gateway, call_as, connect_from};
use super::common::truth::{slide_at_rest, slide_mm};
use std::time::{Duration, Instant};

pub const OPERATOR: &str = "operator-secret-5d2e";
pub const VIEWER: &str = "viewer-secret-8a1b";
pub const OPERATOR_AT: [u8; 4] = [127, 0, 0, 200];

/// Starts a move of the slide to `to` mm and waits until it has left where it stood.
pub async fn moving(gw: &Gateway, to: f64) -> String {
    let from = slide_mm(&gw.modbus).await;
    let args = format!(r#"{{"target_mm":{to},"wait_s":0}}"#);
    let r = call_as(gw, OPERATOR_AT, OPERATOR, "slide_move_to", &args).await;
    assert_eq!(r["status"], "accepted", "{r}");
    for _ in 0..200 {
        if (slide_mm(&gw.modbus).await - from).abs() > 5.0 {
            return r["command_id"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the slide never moved towards {to} mm");
}

/// The operator cancels `id` under `attack`: it must end `cancelled` with the slide standing
/// short of `to`; the time the cancel took goes to the figures.
pub async fn cancelled(gw: &Gateway, id: &str, to: f64, attack: &str) {
    cancelled_from(gw, OPERATOR_AT, id, to, attack).await;
}

/// [`cancelled`], the operator calling from the address `from`.
pub async fn cancelled_from(gw: &Gateway, from: [u8; 4], id: &str, to: f64, attack: &str) {
    let start = Instant::now();
    let args = format!(r#"{{"command_id":"{id}","wait_s":5}}"#);
    let r = call_as(gw, from, OPERATOR, "cancel_command", &args).await;
    let took = start.elapsed();
    assert_eq!(r["status"], "cancelled", "{attack}: {r}");
    let at = slide_at_rest(&gw.modbus).await;
    assert!((at - to).abs() > 5.0, "{attack}: the slide reached {at} mm");
    figure(&format!(
        "{attack}: cancel answered in {} ms; the slide stopped at {at:.1} mm, {to} mm asked",
        took.as_millis()
    ));
}

pub fn figure(line: &str) {
    eprintln!("floods: {line}");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("floods.txt");
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&format!("{line}\n"));
    std::fs::write(path, text).unwrap();
}

/// How many of `held` the server has closed (read 0 bytes or an error within a moment).
pub async fn closed(held: &mut [tokio::net::TcpStream]) -> usize {
    use tokio::io::AsyncReadExt;
    let mut n = 0;
    let mut buf = [0u8; 16];
    for s in held.iter_mut() {
        match tokio::time::timeout(Duration::from_millis(2), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => n += 1,
            _ => {}
        }
    }
    n
}

/// `n` connections that never send a byte, from `addresses` in turn.
pub async fn silent(gw: &Gateway, n: usize, addresses: &[[u8; 4]]) -> Vec<tokio::net::TcpStream> {
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        if let Some(s) = connect_from(addresses[i % addresses.len()], gw.addr).await {
            held.push(s);
        }
    }
    held
}
