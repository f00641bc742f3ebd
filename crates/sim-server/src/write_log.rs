//! [`WriteLog`]: every write that reaches a simulated Modbus unit, one JSON line each, with the
//! client it came from: ground truth about *who* wrote, which the register values alone cannot
//! tell. `closedloop sim PLANT --write-log FILE` keeps one.
//!
//! A line is written when a write request to a served unit arrives, before the device answers,
//! and reaches the file at once, so a reader sees it while the simulator runs. A request the
//! device never answers or acts on (powered off, lost) is logged all the same: the log says who
//! sent what; the registers say what took effect. A request to a unit nobody serves is not logged.
//! One line:
//!
//! ```json
//! {"at":"2026-12-02T20:50:01.123Z","at_ms":1796244601123,"peer":"127.0.0.1:51688",
//!  "listen":"127.0.0.1:1502","unit":1,"device":"slide","area":"holding","start":0,"values":[5000,0]}
//! ```
//!
//! `area` is `coil` (FC05/FC15, `values` booleans) or `holding` (FC06/FC16, `values` 16-bit
//! words). `peer` is the client's address as the listener saw it: the gateway's host and port, or
//! whatever proxy stands in between. Only Modbus TCP writes are logged; MQTT, CAN and OPC UA
//! writes are not (yet).
//!
//! The file is opened for appending, so a restarted simulator adds to it. A line that cannot be
//! written is reported on the log once and the simulator goes on serving: the log is evidence
//! for a test or an audit, never a reason to stop a device.

use closedloop_contract::Write;
use serde_json::json;
use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// An append-only JSON-lines file of the writes the simulated units receive; clones share it.
#[derive(Debug, Clone)]
pub struct WriteLog {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    file: Mutex<File>,
    /// Whether a failed write was reported already (reported once, not per line).
    failed: AtomicBool,
}

/// One write as it reached a unit.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The client's address.
    pub peer: Option<SocketAddr>,
    /// The listener it reached.
    pub listen: SocketAddr,
    /// The Modbus unit id it was addressed to.
    pub unit: u8,
    /// The device serving that unit.
    pub device: &'a str,
    /// What it writes.
    pub write: &'a Write,
}

impl WriteLog {
    /// Opens (creating it if need be) `path` for appending.
    pub fn open(path: &Path) -> io::Result<WriteLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(WriteLog {
            inner: Arc::new(Inner {
                file: Mutex::new(file),
                failed: AtomicBool::new(false),
            }),
        })
    }

    /// Appends one line for `received`, stamped with the wall clock now.
    pub fn record(&self, received: Received<'_>) {
        let line = line(received, now_ms());
        let written = match self.inner.file.lock() {
            Ok(mut file) => file.write_all(line.as_bytes()),
            Err(_) => Err(io::Error::other("the write log's lock was poisoned")),
        };
        if let Err(e) = written
            && !self.inner.failed.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                "the write log cannot be written ({e}); the simulator goes on without it"
            );
        }
    }
}

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The JSON line (newline included) for `received` at `at_ms`.
fn line(received: Received<'_>, at_ms: i64) -> String {
    let (area, start, values) = match received.write {
        Write::Coils { start, values } => ("coil", *start, json!(values)),
        Write::Registers { start, values } => ("holding", *start, json!(values)),
    };
    let entry = json!({
        "at": closedloop_link::clock::rfc3339(at_ms),
        "at_ms": at_ms,
        "peer": received.peer.map(|p| p.to_string()),
        "listen": received.listen.to_string(),
        "unit": received.unit,
        "device": received.device,
        "area": area,
        "start": start,
        "values": values,
    });
    let mut line = entry.to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(write: &Write) -> Received<'_> {
        Received {
            peer: Some("127.0.0.1:51688".parse().unwrap()),
            listen: "127.0.0.1:1502".parse().unwrap(),
            unit: 1,
            device: "slide",
            write,
        }
    }

    #[test]
    fn a_register_write_is_one_line_naming_its_client_unit_and_words() {
        let write = Write::Registers {
            start: 0,
            values: vec![5000, 0],
        };
        let text = line(received(&write), 1_796_244_601_123);
        assert!(text.ends_with('\n') && !text.trim_end().contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["at"], "2026-12-02T20:50:01.123Z");
        assert_eq!(v["at_ms"], 1_796_244_601_123_i64);
        assert_eq!(v["peer"], "127.0.0.1:51688");
        assert_eq!(v["listen"], "127.0.0.1:1502");
        assert_eq!(v["unit"], 1);
        assert_eq!(v["device"], "slide");
        assert_eq!(v["area"], "holding");
        assert_eq!(v["start"], 0);
        assert_eq!(v["values"], json!([5000, 0]));
    }

    #[test]
    fn lines_are_appended_to_what_the_file_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("writes.jsonl");
        std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
        let log = WriteLog::open(&path).unwrap();
        let write = Write::Coils {
            start: 3,
            values: vec![true],
        };
        log.clone().record(received(&write));
        log.record(received(&write));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0]["earlier"], true);
        assert_eq!(lines[2]["area"], "coil");
        assert_eq!(lines[2]["start"], 3);
        assert_eq!(lines[2]["values"], json!([true]));
    }
}
