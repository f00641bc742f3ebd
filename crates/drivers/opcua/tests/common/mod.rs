//! The Python side of the OPC UA interop tests: tests/python/opcua/pump_server.py (asyncua) run
//! as a child process ([`Pump`]) from the virtual environment scripts/python-env makes
//! ([`python`]), the node ids it serves ([`pump`]) and the certificate for its `--secure` mode
//! ([`server_certificate`]).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

/// The repository root (this crate is crates/drivers/opcua).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The tests' virtual environment's python, as scripts/python-env makes it; fails (never skips)
/// with the command that installs it when it or asyncua is missing.
pub fn python() -> PathBuf {
    let venv = std::env::var_os("CLOSEDLOOP_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/closedloop-venv"));
    let python = venv.join("bin/python");
    let check = std::process::Command::new(&python)
        .args([
            "-c",
            "import asyncua; print(asyncua.__version__ if hasattr(asyncua, '__version__') else '')",
        ])
        .output();
    match check {
        Ok(out) if out.status.success() => python,
        Ok(out) => panic!(
            "{} cannot import asyncua ({}). asyncua is pinned in tests/python/requirements.txt; \
             install it with `bash scripts/python-env` (from the repository root)",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "no Python virtual environment at {} ({e}); create it with `bash scripts/python-env` \
             (from the repository root; CLOSEDLOOP_VENV overrides the location)",
            venv.display()
        ),
    }
}

/// pump_server.py as a child process, killed when dropped.
pub struct Pump {
    /// The running server (the tests kill it to see the session go down).
    pub child: Child,
    /// The `opc.tcp://` endpoint it printed on its first line.
    pub endpoint: String,
    /// Everything it wrote to stderr so far.
    stderr: Arc<Mutex<String>>,
}

impl Pump {
    /// pump_server.py with no arguments: anonymous, unsecured.
    pub async fn start() -> Pump {
        Pump::start_with(&[]).await
    }

    /// pump_server.py with extra arguments (`--login USER:PASSWORD`).
    pub async fn start_with(args: &[&str]) -> Pump {
        let script = repo().join("tests/python/opcua/pump_server.py");
        let mut child = Command::new(python())
            .arg(&script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
        let endpoint = match line {
            Ok(Ok(Some(l))) if l.starts_with("opc.tcp://") => l,
            other => panic!(
                "pump_server.py printed no endpoint ({other:?}); its stderr:\n{}",
                stderr.lock().unwrap()
            ),
        };
        Pump {
            child,
            endpoint,
            stderr,
        }
    }

    /// What the server has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// The node id of the pump's variable or method `name` (`ns=2;s=Pump1.{name}`).
pub fn pump(name: &str) -> String {
    format!("ns=2;s=Pump1.{name}")
}

/// A self-signed certificate (DER) and key (PEM) for `pump_server.py --secure`, made by openssl
/// in `dir`; the `--secure` argument naming them.
pub fn server_certificate(dir: &std::path::Path) -> (PathBuf, String) {
    let (cert, key) = (dir.join("pump.der"), dir.join("pump.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-outform", "DER",
        ])
        .args(["-subj", "/CN=closedloop test pump", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args([
            "-addext",
            "subjectAltName=URI:urn:freeopcua:python:server,IP:127.0.0.1",
        ])
        .args([
            "-addext",
            "keyUsage=digitalSignature,nonRepudiation,keyEncipherment,dataEncipherment",
        ])
        .output()
        .expect("openssl (scripts/system-deps installs it)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let arg = format!("{}:{}", cert.display(), key.display());
    (cert, arg)
}
