//! Opens an slcan adapter, optionally sends one DBC-encoded frame, and prints the frames it
//! receives decoded through the DBC, one JSON line each; tests/python/test_dbc_cantools.py
//! runs it against tests/python/slcan_adapter.py over a socat pty pair.
//!
//! `slcan_monitor --port PATH --dbc FILE [--bitrate 500000] [--send MSG:SIG=VAL,...]
//!  [--frames N] [--timeout-s S]`
//!
//! Prints `{"sent": ...}` after a send, `{"frame": ..., "message": ..., "values": ...}` per
//! received frame, and `{"stats": ...}` last. Exits 1 (reason on stderr) if the port cannot be
//! opened, the send fails, or fewer than N frames arrive within the timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use closedloop_can::{CanBus, Dbc, Frame, Interface, decode, encode};
use serde_json::json;

struct Args {
    port: String,
    dbc: String,
    bitrate: u32,
    send: Option<String>,
    frames: usize,
    timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        port: String::new(),
        dbc: String::new(),
        bitrate: 500_000,
        send: None,
        frames: 1,
        timeout: Duration::from_secs(10),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => args.port = value()?,
            "--dbc" => args.dbc = value()?,
            "--bitrate" => {
                args.bitrate = value()?.parse().map_err(|e| format!("--bitrate: {e}"))?
            }
            "--send" => args.send = Some(value()?),
            "--frames" => args.frames = value()?.parse().map_err(|e| format!("--frames: {e}"))?,
            "--timeout-s" => {
                let s: f64 = value()?.parse().map_err(|e| format!("--timeout-s: {e}"))?;
                args.timeout = Duration::from_secs_f64(s);
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if args.port.is_empty() || args.dbc.is_empty() {
        return Err("usage: slcan_monitor --port PATH --dbc FILE [--bitrate N] [--send MSG:SIG=VAL,...] [--frames N] [--timeout-s S]".into());
    }
    Ok(args)
}

/// `MSG:SIG=VAL,...` encoded through the DBC.
fn frame_to_send(dbc: &Dbc, spec: &str) -> Result<Frame, String> {
    let (name, signals) = spec
        .split_once(':')
        .ok_or("--send: expected MSG:SIG=VAL,...")?;
    let message = dbc.message(name).map_err(|e| e.to_string())?;
    let mut values = BTreeMap::new();
    for pair in signals.split(',').filter(|p| !p.is_empty()) {
        let (signal, v) = pair
            .split_once('=')
            .ok_or(format!("--send: expected SIG=VAL, got {pair}"))?;
        let v: f64 = v.parse().map_err(|e| format!("--send {pair}: {e}"))?;
        values.insert(signal.to_string(), v);
    }
    let data = encode(message, &values).map_err(|e| e.to_string())?;
    Ok(Frame::data(message.id(), message.extended(), data))
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

async fn run(args: Args) -> Result<(), String> {
    let dbc = Dbc::load(&args.dbc).map_err(|e| e.to_string())?;
    let to_send = args
        .send
        .as_deref()
        .map(|s| frame_to_send(&dbc, s))
        .transpose()?;
    let bus = CanBus::open(&Interface::Slcan(args.port.clone()), args.bitrate)
        .await
        .map_err(|e| e.to_string())?;
    let mut frames = bus.frames();
    if let Some(frame) = to_send {
        let data = hex(&frame.data);
        bus.send(frame).await.map_err(|e| e.to_string())?;
        println!("{}", json!({ "sent": { "hex": data } }));
    }
    let deadline = tokio::time::Instant::now() + args.timeout;
    for n in 0..args.frames {
        let frame = match tokio::time::timeout_at(deadline, frames.next()).await {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => {
                return Err(format!(
                    "{n} of {} frames within {:?}",
                    args.frames, args.timeout
                ));
            }
        };
        let message = dbc.message_for(frame.id, frame.extended);
        let values: serde_json::Map<String, serde_json::Value> = message
            .map(|m| decode(m, &frame.data))
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        println!(
            "{}",
            json!({
                "frame": { "id": frame.id, "extended": frame.extended, "rtr": frame.rtr, "hex": hex(&frame.data) },
                "message": message.map(|m| m.name()),
                "values": values,
            })
        );
    }
    let s = bus.stats();
    println!(
        "{}",
        json!({ "stats": { "received": s.received, "sent": s.sent, "line_errors": s.line_errors, "lagged": s.lagged } })
    );
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let result = match parse_args() {
        Ok(args) => run(args).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        eprintln!("slcan_monitor: {e}");
        std::process::exit(1);
    }
}
