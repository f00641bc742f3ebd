//! slcan over a real serial line: a socat pty pair, closedloop's `CanBus` on one end and a
//! scripted adapter (tokio-serial) on the other that answers commands, sends frames between
//! garbage and split writes, and then disappears with the pty.
//!
//! socat is a prerequisite (scripts/system-deps installs it): without it these tests fail, they
//! never skip.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use closedloop_can::{BusError, CanBus, Frame, Interface};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tokio_serial::SerialPortBuilderExt;

/// A socat pty pair; socat is killed when this is dropped.
struct PtyPair {
    socat: Child,
    a: String,
    b: String,
}

impl Drop for PtyPair {
    fn drop(&mut self) {
        let _ = self.socat.kill();
        let _ = self.socat.wait();
    }
}

/// Starts `socat -d -d pty,raw,echo=0 pty,raw,echo=0` and reads the two pty paths from the
/// "PTY is /dev/pts/N" lines it logs on stderr.
fn pty_pair() -> PtyPair {
    let mut socat = Command::new("socat")
        .args(["-d", "-d", "pty,raw,echo=0", "pty,raw,echo=0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start socat ({e}); it is a test prerequisite: run scripts/system-deps")
        });
    let stderr = socat.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    // The reader thread keeps draining stderr so socat never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(path) = line.split("PTY is ").nth(1) {
                let _ = tx.send(path.trim().to_string());
            }
        }
    });
    let mut paths = Vec::new();
    while paths.len() < 2 {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(p) => paths.push(p),
            Err(_) => {
                let _ = socat.kill();
                panic!("socat did not report two ptys within 10 s (got {paths:?})");
            }
        }
    }
    PtyPair {
        socat,
        b: paths.pop().expect("two paths"),
        a: paths.pop().expect("two paths"),
    }
}

/// The adapter's side: answers the opening handshake, acks and reports every frame line the
/// host sends, and after the first one sends its script.
async fn adapter(path: String, script: Vec<Vec<u8>>, rx_lines: mpsc::UnboundedSender<String>) {
    let mut port = tokio_serial::new(&path, 115_200)
        .open_native_async()
        .expect("open the adapter's pty");
    let mut line = Vec::new();
    let mut buf = [0u8; 256];
    let mut script = Some(script);
    loop {
        let n = match port.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b != b'\r' {
                line.push(b);
                continue;
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            line.clear();
            let reply: &[u8] = match text.as_str() {
                "C" => b"\x07", // not open yet: Lawicel answers BEL
                "S6" => b"\r",
                "O" => b"\r",
                t if t.starts_with('t') || t.starts_with('T') => {
                    let _ = rx_lines.send(t.to_string());
                    b"\r"
                }
                _ => b"\x07",
            };
            port.write_all(reply).await.expect("reply");
            // The script starts once the host has sent a frame, so the host is surely listening.
            if (text.starts_with('t') || text.starts_with('T'))
                && let Some(script) = script.take()
            {
                for chunk in script {
                    port.write_all(&chunk).await.expect("script");
                    port.flush().await.expect("flush");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }
}

#[tokio::test]
async fn frames_cross_a_real_pty_through_garbage_and_split_writes() {
    let pair = pty_pair();
    let (tx, mut host_lines) = mpsc::unbounded_channel();
    let script: Vec<Vec<u8>> = vec![
        b"\x00\xFFgarbage\r".to_vec(),
        b"t1F02".to_vec(),
        b"01AB\r".to_vec(),
        b"T18DAF1108".to_vec(),
        b"0102030405060708EA5F\r".to_vec(),
        b"t7FF".to_vec(),
        b"\x07".to_vec(), // a BEL cuts the line short: one more error, and no ack is pending
        b"t1230\r".to_vec(),
    ];
    let adapter = tokio::spawn(adapter(pair.b.clone(), script, tx));
    let bus = timeout(
        Duration::from_secs(5),
        CanBus::open(&Interface::Slcan(pair.a.clone()), 500_000),
    )
    .await
    .expect("open within 5 s")
    .expect("open");
    let mut frames = bus.frames();
    bus.send(Frame::data(0x7E0, false, [0x01]))
        .await
        .expect("the trigger frame is acked");
    assert_eq!(host_lines.recv().await.as_deref(), Some("t7E0101"));
    let mut got = Vec::new();
    while got.len() < 3 {
        let f = timeout(Duration::from_secs(5), frames.next())
            .await
            .expect("a frame within 5 s")
            .expect("frame");
        got.push(f);
    }
    assert_eq!(
        got,
        [
            Frame::data(0x1F0, false, [0x01, 0xAB]),
            Frame::data(0x18DA_F110, true, [1, 2, 3, 4, 5, 6, 7, 8]),
            Frame::data(0x123, false, []),
        ]
    );
    bus.send(Frame::data(0x321, false, [0xDE, 0xAD]))
        .await
        .expect("acked");
    assert_eq!(host_lines.recv().await.as_deref(), Some("t3212DEAD"));
    let stats = bus.stats();
    assert_eq!((stats.received, stats.sent), (3, 2));
    assert_eq!(
        stats.line_errors, 2,
        "the garbage line and the line cut by BEL"
    );
    adapter.abort();
}

#[tokio::test]
async fn a_vanished_port_is_an_error_not_a_hang() {
    let pair = pty_pair();
    let (tx, _host_lines) = mpsc::unbounded_channel();
    let adapter = tokio::spawn(adapter(pair.b.clone(), Vec::new(), tx));
    let bus = CanBus::open(&Interface::Slcan(pair.a.clone()), 500_000)
        .await
        .expect("open");
    let mut frames = bus.frames();
    drop(pair); // socat exits: both ptys go away
    let e = timeout(Duration::from_secs(5), frames.next())
        .await
        .expect("the receiver learns within 5 s")
        .expect_err("no frame from a vanished port");
    assert!(matches!(e, BusError::Closed { .. }), "{e}");
    let send = timeout(Duration::from_secs(5), bus.send(Frame::data(1, false, [])))
        .await
        .expect("send answers within 5 s");
    assert_eq!(send, Err(e));
    adapter.abort();
}

#[tokio::test]
async fn a_missing_port_names_itself() {
    let e = CanBus::open(&Interface::Slcan("/dev/nonexistent-slcan".into()), 500_000)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("slcan:/dev/nonexistent-slcan: cannot open"),
        "{e}"
    );
}
