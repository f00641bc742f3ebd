//! `closedloop demo`: the bundled simulated workshop, driven by a real MCP client session.
//!
//! The server and the client speak MCP over an in-process pipe, exactly as over stdio. Each call,
//! its result and its timeline are printed; the demo checks its own six outcomes and exits
//! non-zero if any of them is not what the hardware showed.

use anyhow::{Context, Result, bail};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The bundled plant (also `examples/workshop.toml`).
pub const WORKSHOP: &str = include_str!("../../../examples/workshop.toml");

/// One call of the demo and the outcome it must have: the demo fails when the simulated
/// hardware answers anything else.
struct Step {
    title: &'static str,
    tool: &'static str,
    args: Value,
    expect_status: &'static str,
    expect_code: Option<&'static str>,
}

/// Where the demo keeps its plant file and journal, so that `closedloop trace` and
/// `closedloop commands` can read them after it ends: `$XDG_STATE_HOME/closedloop/demo`, else
/// `~/.local/state/closedloop/demo`, else `closedloop-demo` in the system's temporary folder.
pub fn dir() -> PathBuf {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").and_then(absolute) {
        return state.join("closedloop").join("demo");
    }
    if let Some(home) = std::env::var_os("HOME").and_then(absolute) {
        return home.join(".local/state/closedloop/demo");
    }
    std::env::temp_dir().join("closedloop-demo")
}

/// Writes the bundled plant into `dir`, with an empty journal beside it (the last run's is
/// replaced), and holds `demo.lock` there so that two demos never share one journal.
fn prepare(dir: &Path) -> Result<(PathBuf, std::fs::File)> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the demo folder {}", dir.display()))?;
    let lock = std::fs::File::create(dir.join("demo.lock"))
        .with_context(|| format!("creating {}", dir.join("demo.lock").display()))?;
    if let Err(std::fs::TryLockError::WouldBlock) = lock.try_lock() {
        eprintln!(
            "closedloop demo: waiting for another demo using {} to finish",
            dir.display()
        );
        lock.lock()?;
    }
    let plant_path = dir.join("workshop.toml");
    std::fs::write(&plant_path, WORKSHOP)
        .with_context(|| format!("writing {}", plant_path.display()))?;
    for f in ["workshop.db", "workshop.db-wal", "workshop.db-shm"] {
        match std::fs::remove_file(dir.join(f)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing the last demo's {f}"));
            }
            _ => {}
        }
    }
    Ok((plant_path, lock))
}

/// How to run this very binary from a shell: `closedloop` when that is what `PATH` finds,
/// else its full path (as after `cargo run`).
fn program() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else {
        return "closedloop".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|d| std::fs::canonicalize(d.join("closedloop")).is_ok_and(|found| found == me))
    });
    if on_path {
        "closedloop".into()
    } else {
        crate::serve::shell_word(&me.display().to_string())
    }
}

/// The MCP client side of the demo's in-process session.
type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// Runs the demo; returns an error when an outcome differs from the expected one.
pub async fn run() -> Result<()> {
    let dir = dir();
    let (plant_path, _lock) = prepare(&dir)?;
    let session = Session::start(&plant_path).await?;

    println!("closedloop demo — a simulated workshop driven through MCP\n");
    print_tools(&session.client).await?;
    let mut wrong = Vec::new();
    let mut ids = Vec::new();
    for step in &steps() {
        let outcome = run_step(&session.client, step).await?;
        ids.extend(outcome.command_id.map(|id| (step.tool, id)));
        wrong.extend(outcome.wrong);
    }
    session.close().await;
    if !wrong.is_empty() {
        bail!(
            "the demo did not see what it expected:\n  {}",
            wrong.join("\n  ")
        );
    }
    println!("All six outcomes are what the hardware showed.");
    print_how_to_look_again(&dir, &plant_path, &ids);
    Ok(())
}

/// The engine, the MCP server serving it over an in-process pipe, and the client on the other
/// end: everything the demo must shut down once its steps are done.
struct Session {
    engine: Arc<closedloop_engine::Engine>,
    server_task: tokio::task::JoinHandle<()>,
    client: Client,
}

impl Session {
    /// Starts the engine on the plant at `plant_path`, serves it, and completes the MCP handshake.
    async fn start(plant_path: &Path) -> Result<Session> {
        let engine = crate::serve::start_engine(plant_path).await?;
        let server = closedloop_mcp::Server::new(Arc::clone(&engine), "demo");
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let server_task = tokio::spawn(async move {
            match server.serve(server_io).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => eprintln!("demo server: {e}"),
            }
        });
        let client = ().serve(client_io).await.context("MCP client handshake")?;
        Ok(Session {
            engine,
            server_task,
            client,
        })
    }

    /// Ends the client, the server and the engine, in that order.
    async fn close(self) {
        let _ = self.client.cancel().await;
        self.server_task.abort();
        self.engine.shutdown().await;
    }
}

/// Prints the names `tools/list` answers, as a client first sees them.
async fn print_tools(client: &Client) -> Result<()> {
    let tools = client.list_all_tools().await?;
    println!(
        "tools/list: {}\n",
        tools
            .iter()
            .map(|t| t.name.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// The six calls of the demo, each with the outcome the simulated hardware must produce.
fn steps() -> [Step; 6] {
    [
        Step {
            title: "1. The lamp: switched, and its relay contact confirms it",
            tool: "lamp_switch",
            args: json!({"on": true, "wait_s": 2}),
            expect_status: "completed",
            expect_code: None,
        },
        Step {
            title: "2. The slide: told to go to 150 mm, it stalls at 70 mm",
            tool: "slide_move_to",
            args: json!({"target_mm": 150.0, "wait_s": 5}),
            expect_status: "failed",
            expect_code: Some("MOTOR_STALL"),
        },
        Step {
            title: "3. The gripper: refused, because the slide is faulted",
            tool: "gripper_close",
            args: json!({"wait_s": 2}),
            expect_status: "rejected",
            expect_code: Some("INTERLOCK"),
        },
        Step {
            title: "4. The fan: its supply is off, nothing answers",
            tool: "fan_switch",
            args: json!({"on": true, "wait_s": 2}),
            expect_status: "rejected",
            expect_code: Some("DEVICE_OFFLINE"),
        },
        Step {
            title: "5. The buzzer: delivered, but nothing can confirm it",
            tool: "buzzer_switch",
            args: json!({"on": true, "wait_s": 2}),
            expect_status: "sent",
            expect_code: None,
        },
        Step {
            title: "6. The oven: takes seconds, and is not failed early",
            tool: "oven_set_temperature",
            args: json!({"setpoint_c": 35.0}),
            expect_status: "completed",
            expect_code: None,
        },
    ]
}

/// What one step left behind: the command it created, and how its outcome differed from the
/// expected one (if it did).
struct StepOutcome {
    command_id: Option<String>,
    wrong: Option<String>,
}

/// Calls the step's tool, follows the command to its end, and prints its timeline.
async fn run_step(client: &Client, step: &Step) -> Result<StepOutcome> {
    println!("── {}", step.title);
    let first = call(client, step.tool, step.args.clone()).await?;
    let result = follow_to_end(client, first).await?;
    let command_id = text_field(&result, "command_id").map(str::to_string);
    let status = status_of(&result);
    let code = text_field(&result, "error_code").map(str::to_string);
    let wrong = (status != step.expect_status || code.as_deref() != step.expect_code).then(|| {
        format!(
            "{}: expected {} {:?}, got {status} {code:?}",
            step.tool, step.expect_status, step.expect_code
        )
    });
    print_timeline(&result);
    println!();
    Ok(StepOutcome { command_id, wrong })
}

/// Follows an accepted command to its end, as an agent would: asks `get_command_status` until
/// the status is neither `accepted` nor `running`.
async fn follow_to_end(client: &Client, mut result: CallToolResult) -> Result<CallToolResult> {
    while matches!(status_of(&result).as_str(), "accepted" | "running") {
        let id = text_field(&result, "command_id").unwrap_or("").to_string();
        result = call(
            client,
            "get_command_status",
            json!({"command_id": id, "wait_s": 10}),
        )
        .await?;
    }
    Ok(result)
}

/// Prints where the run's journal is kept and the commands that read it again.
fn print_how_to_look_again(dir: &Path, plant_path: &Path, ids: &[(&str, String)]) {
    let me = program();
    let plant = crate::serve::shell_word(&plant_path.display().to_string());
    println!(
        "\nThe journal of this run is kept in {} until the next demo. Print a timeline again:",
        dir.join("workshop.db").display()
    );
    if let Some((tool, id)) = ids.iter().find(|(tool, _)| *tool == "slide_move_to") {
        println!("  {me} trace {plant} {id}     # {tool}: the stall");
    }
    println!("  {me} commands {plant}     # every command of this run, with its id");
}

/// Calls `tool` with `args`, printing the call and the first text of its answer.
async fn call(client: &Client, tool: &str, args: Value) -> Result<CallToolResult> {
    println!("→ {tool} {args}");
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let r = client
        .call_tool(params)
        .await
        .with_context(|| format!("calling {tool}"))?;
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    println!(
        "← {}{}",
        if r.is_error == Some(true) {
            "[isError] "
        } else {
            ""
        },
        text
    );
    Ok(r)
}

/// A string field of the result's structured content, when it has one.
fn text_field<'a>(r: &'a CallToolResult, name: &str) -> Option<&'a str> {
    r.structured_content.as_ref().and_then(|v| v[name].as_str())
}

/// The result's `status`, or an empty string when it has none.
fn status_of(r: &CallToolResult) -> String {
    text_field(r, "status").unwrap_or("").to_string()
}

fn print_timeline(r: &CallToolResult) {
    let Some(v) = &r.structured_content else {
        return;
    };
    let Some(timeline) = v["timeline"].as_array() else {
        return;
    };
    let ms = |at: &str| -> i64 {
        // "2026-11-29T16:00:00.123Z": seconds and millis within the minute are enough for offsets.
        let sec: f64 = at.get(17..23).and_then(|s| s.parse().ok()).unwrap_or(0.0);
        let min: i64 = at.get(14..16).and_then(|s| s.parse().ok()).unwrap_or(0);
        min * 60_000 + (sec * 1000.0).round() as i64
    };
    let start = timeline
        .first()
        .and_then(|e| e["at"].as_str())
        .map(ms)
        .unwrap_or(0);
    println!("   timeline:");
    // A move logs a signal read every poll; show the first and last few.
    let signals: Vec<usize> = (0..timeline.len())
        .filter(|i| timeline[*i]["event"] == "signal")
        .collect();
    let hidden: Vec<usize> = if signals.len() > 6 {
        signals[3..signals.len() - 3].to_vec()
    } else {
        vec![]
    };
    for (i, e) in timeline.iter().enumerate() {
        if hidden.first() == Some(&i) {
            println!("   {:>9}  … {} more signal reads …", "", hidden.len());
        }
        if hidden.contains(&i) {
            continue;
        }
        let at = e["at"].as_str().unwrap_or("");
        let mut rest = e.as_object().cloned().unwrap_or_default();
        rest.remove("at");
        let event = rest
            .remove("event")
            .and_then(|x| x.as_str().map(str::to_string))
            .unwrap_or_default();
        let extra = if rest.is_empty() {
            String::new()
        } else {
            Value::Object(rest).to_string()
        };
        println!(
            "   +{:>5} ms  {:<11} {}",
            (ms(at) - start).rem_euclid(3_600_000),
            event,
            extra
        );
    }
}
