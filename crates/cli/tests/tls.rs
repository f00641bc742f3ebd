//! `closedloop serve --http ADDR --tls-cert FILE --tls-key FILE`, driven by curl (a TLS client
//! nobody here wrote): a tool call over HTTPS completes against the simulator, a client that
//! does not trust the certificate is refused, plain HTTP on the TLS port gets no answer, a key
//! that is not the certificate's stops the server before it starts, and plain HTTP beyond
//! loopback is announced with a warning.
//!
//! The certificates in `tests/tls/` are test material made by `tests/tls/make.sh`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const PLANT: &str = include_str!("../../../tests/plants/faults.toml");
const SECRET: &str = "tls-test-secret";
const TOKEN: &str = r#"
[[server.token]]
name = "ops"
sha256 = "2916963a7e945e261040e582f864ab689e7ffd9d30cc0e4e2cf0cb12141618e9"
scopes = ["read", "actuate:*"]
"#;

fn tls_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tls")
        .join(name)
}

fn plant_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plant.toml"), format!("{PLANT}{TOKEN}")).unwrap();
    dir
}

fn serve(dir: &Path, addr: &str, tls: Option<(&str, &str)>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.join("plant.toml"))
        .args(["--http", addr]);
    if let Some((cert, key)) = tls {
        cmd.arg("--tls-cert").arg(tls_file(cert));
        cmd.arg("--tls-key").arg(tls_file(key));
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Starts the server and returns it with the URL it announced and every stderr line before it.
async fn started(cmd: &mut Command) -> (Child, String, Vec<String>) {
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut before = Vec::new();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("announced in time")
            .unwrap()
            .unwrap_or_else(|| panic!("stderr closed before the announcement: {before:?}"));
        if let Some(url) = line.strip_prefix("closedloop: listening on ") {
            break url.to_string();
        }
        before.push(line);
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url, before)
}

/// One 2026-07-28 `tools/call` by curl; returns curl's exit code, the HTTP status and the body.
async fn curl_call(url: &str, ca: Option<&Path>, tool: &str, args: &str) -> (i32, String) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", "-w", "\n%{http_code}"]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    let out = cmd
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", "Accept: application/json, text/event-stream"])
        .args(["-H", "MCP-Protocol-Version: 2026-07-28"])
        .args(["-H", "Mcp-Method: tools/call"])
        .args(["-H", &format!("Mcp-Name: {tool}")])
        .args(["-H", &format!("Authorization: Bearer {SECRET}")])
        .args(["--data-binary", &body, url])
        .output()
        .await
        .expect("curl is installed (scripts/system-deps)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_https_completes_a_tool_call_for_a_client_that_trusts_the_certificate() {
    let dir = plant_dir();
    let mut cmd = serve(
        dir.path(),
        "127.0.0.1:0",
        Some(("server.pem", "server.key")),
    );
    let (_child, url, _) = started(&mut cmd).await;
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let ca = tls_file("ca.pem");

    let (code, answer) =
        curl_call(&url, Some(&ca), "lamp_switch", r#"{"on":true,"wait_s":5}"#).await;
    assert_eq!(code, 0, "{answer}");
    assert!(answer.ends_with("\n200"), "{answer}");
    assert!(answer.contains(r#""status":"completed""#), "{answer}");

    // The name in the certificate works as well as the address.
    let by_name = url.replacen("127.0.0.1", "localhost", 1);
    let (code, answer) = curl_call(&by_name, Some(&ca), "lamp_get_state", "{}").await;
    assert_eq!(code, 0, "{answer}");
    assert!(answer.ends_with("\n200"), "{answer}");

    // curl's own CA bundle does not hold the test CA: the certificate is not trusted (60).
    let (code, answer) = curl_call(&url, None, "lamp_get_state", "{}").await;
    assert_eq!(code, 60, "{answer}");

    // Plain HTTP to the TLS port: no HTTP answer comes back, the handshake fails.
    let plain = url.replacen("https://", "http://", 1);
    let (code, answer) = curl_call(&plain, None, "lamp_get_state", "{}").await;
    assert_ne!(code, 0, "{answer}");
    assert!(!answer.contains("completed"), "{answer}");
}

#[tokio::test]
async fn serve_https_with_a_key_that_is_not_the_certificates_is_refused_before_starting() {
    let dir = plant_dir();
    // The CA's certificate with the server's key: a pair that does not match.
    let out = serve(dir.path(), "127.0.0.1:0", Some(("ca.pem", "server.key")))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("do not make a usable pair"), "{err}");
    assert!(
        err.contains("ca.pem") && err.contains("server.key"),
        "{err}"
    );
    assert!(!dir.path().join("journal.db").exists(), "nothing started");

    // A certificate file that holds no certificate names the file and the fix.
    let out = serve(dir.path(), "127.0.0.1:0", Some(("make.sh", "server.key")))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("make.sh") && err.contains("BEGIN CERTIFICATE"),
        "{err}"
    );
}

#[tokio::test]
async fn serve_plain_http_beyond_loopback_warns_at_start() {
    let dir = plant_dir();
    let mut cmd = serve(dir.path(), "0.0.0.0:0", None);
    let (_child, url, before) = started(&mut cmd).await;
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let warning = before.join("\n");
    assert!(
        warning.contains("WARNING: plain HTTP on 0.0.0.0:0") && warning.contains("--tls-cert"),
        "{warning}"
    );
}
