//! `closedloop serve --log-file`: it records info logs without `CLOSEDLOOP_LOG`, and `kill -HUP`
//! reopens the file by its name, as logrotate needs.

mod common;

use common::closedloop;

/// Task: `--log-file` alone records the server's info logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_log_file_records_info_logs_without_closedloop_log() {
    use rmcp::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("workshop.toml");
    std::fs::write(&plant, include_str!("../../../examples/workshop.toml")).unwrap();
    let log = dir.path().join("serve.log");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(&plant)
        .arg("--log-file")
        .arg(&log)
        .env_remove("CLOSEDLOOP_LOG")
        .stderr(std::process::Stdio::null());
    let client = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let args = serde_json::json!({"on": true, "wait_s": 2});
    let r = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("lamp_switch")
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let id = r.structured_content.unwrap()["command_id"]
        .as_str()
        .unwrap()
        .to_string();
    client.cancel().await.unwrap();
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("shut down cleanly") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for needle in [
        " INFO ",
        "closedloop serving MCP over stdio",
        id.as_str(),
        "shut down cleanly",
    ] {
        assert!(
            text.contains(needle),
            "{needle:?} missing from the log:\n{text}"
        );
    }
    let help = closedloop().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("at info level unless CLOSEDLOOP_LOG says otherwise"),
        "{help}"
    );
}

/// `kill -HUP` after the log file was moved away (what logrotate does): the server keeps
/// running and its next lines go to a new file under the old name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reopens_the_log_file_by_its_name_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("workshop.toml");
    std::fs::write(&plant, include_str!("../../../examples/workshop.toml")).unwrap();
    let log = dir.path().join("serve.log");
    let rotated = dir.path().join("serve.log.1");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("serve")
        .arg(&plant)
        .arg("--log-file")
        .arg(&log)
        .env_remove("CLOSEDLOOP_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let read_until = |path: std::path::PathBuf, needle: &'static str| async move {
        for _ in 0..200 {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.contains(needle) {
                return text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("{needle:?} never appeared in {}", path.display());
    };
    read_until(log.clone(), "closedloop serving MCP over stdio").await;
    std::fs::rename(&log, &rotated).unwrap();
    let pid = child.id().unwrap().to_string();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    let fresh = read_until(log.clone(), "log file reopened on SIGHUP").await;
    assert!(
        !fresh.contains("closedloop serving MCP"),
        "the new file repeats the old one:\n{fresh}"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP ended the server"
    );
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(
        !old.contains("reopened"),
        "the moved file got the new lines:\n{old}"
    );
    child.kill().await.unwrap();
}
