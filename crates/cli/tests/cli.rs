//! The command line as a newcomer meets it: `check`, `demo`, `commands`, `trace`, exit codes and
//! one-line errors — and the README's plant examples, checked as `closedloop check` would.

use std::process::Command;

fn closedloop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_closedloop"))
}

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

#[test]
fn check_passes_on_every_example_plant_and_prints_the_tool_surface() {
    for plant in [
        "examples/workshop.toml",
        "examples/modbus-workshop.toml",
        "examples/mqtt-workshop.toml",
        "examples/can-workshop.toml",
        "examples/opcua-workshop.toml",
        "tests/plants/faults.toml",
    ] {
        let out = closedloop().arg("check").arg(repo(plant)).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{plant}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("OK"), "{stdout}");
    }
    let out = closedloop()
        .arg("check")
        .arg(repo("examples/workshop.toml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("slide_move_to") && stdout.contains("\"maximum\": 300.0"),
        "{stdout}"
    );
}

#[test]
fn check_refuses_a_bad_plant_naming_file_device_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        r#"
[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contakt == params.on"
"#,
    )
    .unwrap();
    let out = closedloop().arg("check").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml")
            && err.contains("lamp")
            && err.contains("done_when")
            && err.contains("contakt"),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2_and_help_is_everywhere() {
    let out = closedloop().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    for sub in [
        vec!["--help"],
        vec!["check", "--help"],
        vec!["serve", "--help"],
        vec!["demo", "--help"],
        vec!["trace", "--help"],
        vec!["commands", "--help"],
    ] {
        let out = closedloop().args(&sub).output().unwrap();
        assert!(out.status.success(), "{sub:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{sub:?}"
        );
    }
}

/// Runs a command line the demo printed (`PROGRAM ARGS...     # comment`).
fn run_printed(line: &str) -> std::process::Output {
    let words: Vec<&str> = line
        .split("  #")
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    Command::new(words[0]).args(&words[1..]).output().unwrap()
}

#[test]
fn demo_exits_0_shows_the_six_outcomes_and_its_trace_command_works() {
    let state = tempfile::tempdir().unwrap();
    let out = closedloop()
        .arg("demo")
        .env("XDG_STATE_HOME", state.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "Completed and confirmed by the device's feedback: lamp switch",
        "Failed (MOTOR_STALL)",
        "position_mm = 70",
        "Rejected (INTERLOCK)",
        "Rejected (DEVICE_OFFLINE)",
        "Sent, not confirmed: buzzer switch",
        "Completed and confirmed by the device's feedback: oven set_temperature",
        "All six outcomes",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
    // The journal stays where the demo says, and the commands it prints work after it ended.
    let dir = state.path().join("closedloop/demo");
    assert!(
        stdout.contains(&format!(
            "The journal of this run is kept in {} until the next demo. Print a timeline again:",
            dir.join("workshop.db").display()
        )),
        "{stdout}"
    );
    assert!(dir.join("workshop.db").exists());
    // The test binary's closedloop is not on PATH: the demo names it by its full path.
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_closedloop")).unwrap();
    let plant = dir.join("workshop.toml");
    let prefix = format!("  {} trace {} ", exe.display(), plant.display());
    let trace = stdout
        .lines()
        .find(|l| l.starts_with(&prefix) && l.ends_with("# slide_move_to: the stall"))
        .unwrap_or_else(|| panic!("no trace command in:\n{stdout}"));
    let out = run_printed(trace);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{trace}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("slide.move_to") && text.contains("error  MOTOR_STALL"),
        "{text}"
    );
    let commands = format!(
        "  {} commands {}     # every command of this run, with its id",
        exe.display(),
        plant.display()
    );
    assert!(stdout.lines().any(|l| l == commands), "{stdout}");
    let out = run_printed(&commands);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 6);
    // An id the journal does not have.
    let out = closedloop()
        .arg("trace")
        .arg(&plant)
        .arg("nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no command has id"));
}

#[test]
fn commands_and_trace_never_create_a_journal() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, include_str!("../../../tests/plants/faults.toml")).unwrap();
    let expected = format!(
        "error: no journal at {} yet: nothing has run\n",
        dir.path().join("journal.db").display()
    );
    let out = closedloop().arg("commands").arg(&plant).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), expected);
    let out = closedloop()
        .arg("trace")
        .arg(&plant)
        .arg("0193")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), expected);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files, ["plant.toml"]);
    let out = closedloop()
        .args(["commands"])
        .arg(&plant)
        .args(["--status", "done"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a status"));
}

/// Every ```toml block of the README is a plant file (or the start of one) that `check` accepts.
#[test]
fn readme_plant_examples_pass_check() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in readme.lines() {
        match (&mut cur, line.trim_start()) {
            (None, l) if l.starts_with("```toml") => cur = Some(String::new()),
            (Some(b), l) if l.starts_with("```") => {
                blocks.push(std::mem::take(b));
                cur = None;
            }
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    assert!(!blocks.is_empty(), "the README has no plant example");
    let dir = tempfile::tempdir().unwrap();
    for (i, b) in blocks.iter().enumerate() {
        let path = dir.path().join(format!("readme{i}.toml"));
        std::fs::write(&path, b).unwrap();
        let out = closedloop().arg("check").arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "README block {i}:\n{b}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Writes `body` as `DIR/name` and runs `closedloop check` on it: (exit code, stdout, stderr).
fn check_text(name: &str, body: &str) -> (Option<i32>, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, body).unwrap();
    let out = closedloop()
        .current_dir(dir.path())
        .arg("check")
        .arg(name)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    )
}

const SIM_MAP_MISTAKES: &str = r#"
[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch."
params = { on = { type = "bool" } }
write = [{ coil = 7, value = "params.on" }]
done_when = "contact == params.on"

[[device]]
id = "buzzer"
description = "Buzzer without a contact"
driver = { kind = "sim", model = "relay", feedback = false }
[device.signals]
contact = { discrete_input = 0 }

[[device]]
id = "slide"
description = "Slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 40003, type = "i32", scale = 0.01 }
target_mm = { holding = 0, scale = 0.01 }
fault = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move."
params = { target_mm = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, type = "i32", value = "true" }, { coil = 0, value = "true" }]
done_when = "!fault"
[[device.action]]
name = "home"
description = "Home."
params = {}
write = [{ holding = 2, type = "i32", value = "0" }]
done_when = "!fault"
"#;

/// Task: `check` knows the simulator's register maps.
#[test]
fn check_refuses_addresses_and_types_the_simulated_model_does_not_have() {
    let (code, stdout, stderr, _dir) = check_text("mistakes.toml", SIM_MAP_MISTAKES);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(!stdout.contains("OK"), "{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    for want in [
        "mistakes.toml: device \"lamp\", key action.switch.write[0].coil: the simulated relay has no coil 7; its writable coils: coil 0 (the commanded coil state, read/write). The simulator refuses the write (exception 2), so every command fails REGISTER_INVALID. Write coil = 0",
        "mistakes.toml: device \"buzzer\", key signals.contact.discrete_input: the simulated relay has no discrete input 0 with feedback = false: there is no contact to read, and the simulator refuses every read of it (exception 2), so this signal never has a value. Set feedback = true if the relay has an auxiliary contact; otherwise remove this signal and confirm nothing (verification = \"none\") or only the coil (verification = \"readback\")",
        "mistakes.toml: device \"slide\", key signals.position_mm.holding: the simulated stepper has no holding 40003; its holding registers: holding 0–1 (the target position, i32 in 0.01 mm, read/write) and holding 2–3 (the encoder position, i32 in 0.01 mm, read-only). The simulator refuses every read of it (exception 2), so this signal never has a value. Did you mean holding = 2? Addresses are 0-based PDU addresses; 40001 is holding = 0",
        "mistakes.toml: device \"slide\", key signals.target_mm.type: holding 0–1 of the simulated stepper is the target position, an i32 in 0.01 mm over two registers; as type = \"u16\" this read covers only holding 0, the high word. Write type = \"i32\"",
        "mistakes.toml: device \"slide\", key action.move_to.write[0].value: value \"true\" is a bool, and holding 0–1 of the simulated stepper is the target position (i32 in 0.01 mm): the bool would be written as the number 0 or 1. Write a number in the register's units; to switch or trigger something write a coil: coil 0 (start, write true; reads false), coil 1 (stop, write true; reads false) and coil 2 (fault reset, write true; reads false)",
        "mistakes.toml: device \"slide\", key action.home.write[0].holding: holding 2–3 of the simulated stepper is the encoder position: read-only. The simulator refuses the write (exception 2), so every command fails REGISTER_INVALID. Write holding 0–1 (the target position, i32 in 0.01 mm, read/write) instead",
    ] {
        assert!(lines.contains(&want), "missing\n{want}\nin\n{stderr}");
    }
    assert_eq!(lines.len(), 6, "{stderr}");
}

#[test]
fn check_refuses_1_based_addresses_on_a_sim_table_of_closedloop_sim_too() {
    let (code, _, stderr, _dir) = check_text(
        "bench.toml",
        r#"
[[device]]
id = "oven"
description = "Oven"
driver = { kind = "modbus-tcp", address = "127.0.0.1:1502", unit = 1 }
[device.sim]
model = "heater"
listen = "127.0.0.1:1502"
[device.signals]
temperature_c = { input = 30001, type = "i16", scale = 0.1 }
"#,
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "bench.toml: device \"oven\", key signals.temperature_c.input: the simulated heater of [device.sim] has no input 30001; its input registers: input 0 (the temperature, i16 in 0.1 °C, read-only). The simulator refuses every read of it (exception 2), so this signal never has a value. Did you mean input = 0? Addresses are 0-based PDU addresses; 30001 is input = 0"
    );
}

#[test]
fn check_warns_about_1_based_modbus_addresses_and_still_passes() {
    let (code, stdout, stderr, _dir) = check_text(
        "plc.toml",
        r#"
[[device]]
id = "plc"
description = "A PLC"
driver = { kind = "modbus-rtu", port = "/dev/ttyUSB0", baud = 19200, unit = 1 }
[device.signals]
level = { holding = 40001 }
pressure = { input = 30002 }
door = { discrete_input = 10001 }
[[device.action]]
name = "set_level"
description = "Set the level."
params = { level = { type = "number", min = 0.0, max = 100.0 } }
write = [{ holding = 40001, value = "params.level" }]
done_when = "level == params.level"
"#,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("plc.toml: OK"), "{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "warning: plc.toml: device \"plc\", key signals.door.discrete_input: discrete_input = 10001 looks like a 1-based register number: did you mean discrete_input = 0? Addresses are 0-based PDU addresses; 10001 is discrete_input = 0",
            "warning: plc.toml: device \"plc\", key signals.level.holding: holding = 40001 looks like a 1-based register number: did you mean holding = 0? Addresses are 0-based PDU addresses; 40001 is holding = 0",
            "warning: plc.toml: device \"plc\", key signals.pressure.input: input = 30002 looks like a 1-based register number: did you mean input = 1? Addresses are 0-based PDU addresses; 30001 is input = 0",
            "warning: plc.toml: device \"plc\", key action.set_level.write[0].holding: holding = 40001 looks like a 1-based register number: did you mean holding = 0? Addresses are 0-based PDU addresses; 40001 is holding = 0",
        ]
    );
}

#[test]
fn serve_refuses_an_in_process_sim_address_the_model_does_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mistakes.toml");
    std::fs::write(&path, SIM_MAP_MISTAKES).unwrap();
    let out = closedloop()
        .arg("serve")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key action.switch.write[0].coil: the simulated relay has no coil 7"),
        "{err}"
    );
    assert!(
        !dir.path().join("closedloop.db").exists(),
        "no journal for a refused plant"
    );
}

#[test]
fn serve_refuses_an_in_memory_journal_that_would_lose_accepted_commands() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plant.toml");
    let plant = std::fs::read_to_string(repo("examples/workshop.toml")).unwrap();
    let plant = match plant.find("journal = ") {
        Some(_) => plant
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("journal = ") {
                    "journal = \"sqlite::memory:\"".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        None => plant.replacen("[server]", "[server]\njournal = \"sqlite::memory:\"", 1),
    };
    std::fs::write(&path, plant).unwrap();
    let out = closedloop()
        .arg("serve")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("keeps nothing"), "{err}");
    assert!(err.contains("sqlite://closedloop.db"), "{err}");
}

/// Kills a child when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lines of `r`, delivered on a channel so a test can wait for them with a deadline.
fn lines_of(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line.trim_end_matches('\r').to_string()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Collects lines until one contains `last` (at most 30 s).
fn lines_until(rx: &std::sync::mpsc::Receiver<String>, last: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(last);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!("no line with {last:?} ({e}); got {seen:#?}"),
        }
    }
}

/// Task: `serve` at a terminal says what it is for, and goes on serving.
#[test]
fn serve_at_a_terminal_explains_that_it_speaks_mcp_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("workshop.toml");
    std::fs::write(&plant, include_str!("../../../examples/workshop.toml")).unwrap();
    let plant = std::fs::canonicalize(&plant).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_closedloop")).unwrap();
    // util-linux `script` runs the command with a pty as its stdin, as a terminal would.
    let mut child = Command::new("script")
        .args(["-q", "-f", "-e", "-c"])
        .arg(format!("{} serve {}", exe.display(), plant.display()))
        .arg("/dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("util-linux `script` runs the server on a pty");
    let out = lines_of(child.stdout.take().unwrap());
    let mut child = Killed(child);
    let seen = lines_until(&out, "Serving on stdio");
    let want = [
        "closedloop serve speaks MCP (JSON-RPC) on stdin and stdout: an MCP client starts it and talks to it; typing here does nothing useful.".to_string(),
        "  Claude Desktop (claude_desktop_config.json) or Cursor (.cursor/mcp.json):".into(),
        format!(
            "    {{ \"mcpServers\": {{ \"workshop\": {{ \"command\": \"{}\", \"args\": [\"serve\", \"{}\"] }} }} }}",
            exe.display(),
            plant.display()
        ),
        format!(
            "  Over HTTP instead: closedloop serve {} --http 127.0.0.1:8080  (then the URL http://127.0.0.1:8080/mcp)",
            plant.display()
        ),
        "  To watch it work without a client: closedloop demo".into(),
        "Serving on stdio until the client closes it or Ctrl-C.".into(),
    ];
    assert_eq!(seen[seen.len() - want.len()..], want, "{seen:#?}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the server keeps serving"
    );

    // Started by a client (stdin a pipe), it says nothing of the kind.
    let out = closedloop()
        .arg("serve")
        .arg(&plant)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("speaks MCP"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

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

/// One HTTP request by hand with this `Host`; returns the status line.
fn http_status(addr: std::net::SocketAddr, host: &str, token: &str) -> String {
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_devices","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: list_devices\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or("").to_string()
}

/// Task: `--http 0.0.0.0:0` prints URLs a client can use, and those URLs work.
#[test]
fn serve_http_on_every_interface_prints_reachable_urls() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("lan.toml");
    std::fs::write(
        &plant,
        r#"
[[server.token]]
name = "ops"
sha256 = "c61ccd29905e57d595497d0db43a95e8c9200d54c5fec8122aac6580658ad5c3"
scopes = ["read"]

[[device]]
id = "probe"
description = "Room probe"
driver = { kind = "sim", model = "sensor", value = 21.5 }
[device.signals]
room_c = { input = 0, type = "i16", scale = 0.1 }
"#,
    )
    .unwrap();
    let mut child = closedloop()
        .arg("serve")
        .arg(&plant)
        .args(["--http", "0.0.0.0:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let _child = Killed(child);
    let seen = lines_until(&err, "is every interface");
    assert!(
        !seen.iter().any(|l| l.contains("http://0.0.0.0")),
        "{seen:#?}"
    );
    let url = |l: &str, prefix: &str| -> Option<std::net::SocketAddr> {
        l.strip_prefix(prefix)?.strip_suffix("/mcp")?.parse().ok()
    };
    // Plain HTTP where other machines can reach it is said first, as a warning.
    assert!(
        seen[0].starts_with("closedloop: WARNING: plain HTTP on 0.0.0.0:"),
        "{seen:#?}"
    );
    let first = seen
        .iter()
        .find_map(|l| url(l, "closedloop: listening on http://"))
        .unwrap_or_else(|| panic!("no listening line: {seen:#?}"));
    assert!(first.ip().is_loopback(), "{seen:#?}");
    let port = first.port();
    assert_eq!(
        seen.last().unwrap(),
        &format!(
            "closedloop: 0.0.0.0 is every interface of this host: its other addresses answer on port {port} too; under a DNS name, add --allow-host NAME"
        )
    );
    let others: Vec<std::net::SocketAddr> = seen
        .iter()
        .filter_map(|l| url(l, "closedloop: also on http://"))
        .collect();
    for addr in std::iter::once(first).chain(others) {
        assert_eq!(addr.port(), port);
        let status = http_status(addr, &addr.to_string(), "newcomer-secret");
        assert!(status.contains(" 200 "), "{addr}: {status}");
    }
    let refused = http_status(first, "evil.example", "newcomer-secret");
    assert!(refused.contains(" 403 "), "{refused}");
}

/// The README's section `## title`, up to the next `## ` heading.
fn section<'a>(readme: &'a str, title: &str) -> &'a str {
    let start = readme
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title:?}"));
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

/// Task: the README a newcomer reads first.
#[test]
fn readme_sets_up_in_two_commands_and_names_what_the_server_offers() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    // The repository stands on its own.
    assert!(!readme.contains("../shared"), "the README links outside");

    // Set up: exactly two commands, the demo and the tests; CI is told later.
    let setup = section(&readme, "Set up (two commands)");
    let block = setup
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block");
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        commands,
        ["cargo run -p closedloop -- demo", "bash scripts/test"]
    );
    assert_eq!(setup.matches("```sh").count(), 1, "{setup}");
    assert!(!setup.contains(".ci/run"), "{setup}");
    assert!(section(&readme, "Tests and CI").contains("CI (`.ci/run`) runs the same command"));

    // Install, and the MCP surface beyond the tools.
    assert!(readme.contains("cargo install --path crates/cli"));
    for needle in [
        "`device://{id}/state`",
        "`device://{id}/config`",
        "`command://{id}`",
        "`command://{id}/timeline`",
        "`diagnose_device(device)`",
        "`act_and_confirm(device, action)`",
        "**Instructions**",
        "become `omitted` entries counting them",
        "`list_commands` returns short rows, and `omitted`",
    ] {
        assert!(readme.contains(needle), "README lacks {needle}");
    }
    let codes = section(&readme, "Statuses and error codes");
    for row in [
        "| `needs_confirmation` |",
        "| `UNAUTHORIZED` |",
        "| `UNKNOWN_DEVICE` |",
    ] {
        assert!(
            codes.lines().any(|l| l.starts_with(row)),
            "no row {row} in\n{codes}"
        );
    }

    // Every relative link points at a file of the repository, and the docs are linked.
    let mut linked = Vec::new();
    for part in readme.split("](").skip(1) {
        let target = part.split(')').next().unwrap();
        if target.starts_with("http") || target.starts_with('#') {
            continue;
        }
        let file = target.split('#').next().unwrap();
        assert!(repo(file).exists(), "README links to missing {target}");
        linked.push(file.to_string());
    }
    for doc in [
        "docs/simulator.md",
        "docs/plant-bounds.md",
        "docs/first-plant.md",
        "docs/architecture.md",
    ] {
        assert!(
            linked.iter().any(|l| l == doc),
            "README does not link {doc}"
        );
    }
}

/// `--max-connections 0` and `--idle-timeout 0` would refuse or drop every client: refused at
/// start, naming the flag and what to give.
#[test]
fn serve_http_refuses_connection_limits_that_would_refuse_every_client() {
    for (flag, value, says) in [
        (
            "--max-connections",
            "0",
            "--max-connections 0 would refuse every client",
        ),
        (
            "--idle-timeout",
            "0",
            "--idle-timeout 0: give a number of seconds above zero",
        ),
        (
            "--idle-timeout=-3",
            "",
            "--idle-timeout -3: give a number of seconds above zero",
        ),
    ] {
        let out = closedloop()
            .arg("serve")
            .arg(repo("examples/workshop.toml"))
            .args(["--http", "127.0.0.1:0", flag])
            .args((!value.is_empty()).then_some(value))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {err}");
        assert!(err.contains(says), "{flag} {value}: {err}");
    }
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
