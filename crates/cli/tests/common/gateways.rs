//! Gateways as child processes on one PostgreSQL journal, over the Modbus workshop that
//! `closedloop sim` serves: start them, call their tools over HTTP, read their journal's view
//! of a command, and signal them (the simulator's registers are read in `truth`).

use super::Running;
use super::proxy::Proxy;
use closedloop_journal::{CommandRow, EventRow};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `closedloop sim` of the Modbus workshop on a free port, logging every write it receives to
/// `dir/writes.jsonl` ([`writes`]); the plant `serve` uses, journaled to `journal` with leases
/// of `lease_s`. Returns the sim and the Modbus address.
pub fn start_sim(dir: &Path, journal: &str, lease_s: u32) -> (Running, String) {
    let write_log = dir.join("writes.jsonl");
    let more = [OsStr::new("--write-log"), write_log.as_os_str()];
    let (sim, _control, port) = super::sim_modbus_workshop(dir, &more);
    let port = port.unwrap_or_default();
    let plant = super::MODBUS_WORKSHOP
        .replace(
            "address = \"127.0.0.1:1502\"",
            &format!("address = \"{port}\""),
        )
        .replace(
            "journal = \"sqlite://modbus-workshop.db\"",
            &format!("journal = \"{journal}\"\nlease_s = {lease_s}"),
        );
    std::fs::write(dir.join("plant.toml"), plant).unwrap();
    (sim, port)
}

/// `closedloop serve --instance NAME --http 127.0.0.1:0`: the process and its host:port.
pub fn gateway(dir: &Path, name: &str) -> (Child, String) {
    gateway_on(&dir.join("plant.toml"), name)
}

/// [`gateway`] reaching the simulator at `modbus` through `proxy` (a proxy to `modbus`), so
/// the simulator's write log tells its writes by the proxy's [`Proxy::upstream_locals`].
pub fn gateway_through(dir: &Path, name: &str, modbus: &str, proxy: &Proxy) -> (Child, String) {
    let plant = std::fs::read_to_string(dir.join("plant.toml")).unwrap();
    let own = dir.join(format!("plant_{name}.toml"));
    std::fs::write(&own, plant.replace(modbus, &proxy.addr)).unwrap();
    gateway_on(&own, name)
}

/// Every line of the simulator's write log (`start_sim`'s `dir/writes.jsonl`) so far.
pub fn writes(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("writes.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A loopback address nothing listens on (a port just freed): a device b reaches only there is
/// as good as on a serial line of another machine.
pub fn closed_address() -> String {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    nobody.local_addr().unwrap().to_string()
}

/// The wall clock in Unix milliseconds, as the write log's `at_ms` counts it.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// [`gateway`] serving the plant file `plant`.
pub fn gateway_on(plant: &Path, name: &str) -> (Child, String) {
    let mut serve = Command::new(env!("CARGO_BIN_EXE_closedloop"));
    serve
        .arg("serve")
        .arg(plant)
        .args(["--instance", name, "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    dies_with_its_test(&mut serve);
    let mut child = serve.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let host_port = loop {
        let line = lines.next().expect("serve announces").unwrap();
        if let Some(url) = line.strip_prefix("closedloop: listening on http://") {
            break url.trim_end_matches("/mcp").to_string();
        }
    };
    // Keep draining stderr so the gateway never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, host_port)
}

/// Makes the process `command` starts die with the test's thread that started it (Linux's
/// parent-death signal): a test that fails before it kills its gateways would otherwise leave
/// them running, holding PostgreSQL connections until the server refuses the next tests'.
fn dies_with_its_test(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe, and the closure touches nothing else.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// One stateless `tools/call` over a fresh connection: the result's structured content.
pub async fn call(host_port: &str, tool: &str, args: &str) -> Value {
    call_raw(host_port, tool, args).await["result"]["structuredContent"].clone()
}

/// [`call`]'s whole JSON-RPC answer (a `result` or an `error`).
pub async fn call_raw(host_port: &str, tool: &str, args: &str) -> Value {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(host_port).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let json = &answer[answer.find("\r\n\r\n").expect("a body") + 4..];
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

/// The value of the series `series` (name and labels as exposed, e.g.
/// `closedloop_lease_rounds_total{outcome="ok"}`) on `host_port`'s `/metrics`, if exposed.
pub async fn metric(host_port: &str, series: &str) -> Option<f64> {
    let request =
        format!("GET /metrics HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n");
    let mut stream = tokio::net::TcpStream::connect(host_port).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `call` on a gateway that has just taken the device over: while it is still recovering the
/// commands the previous owner left it refuses, exactly `DEVICE_BUSY` saying so, and the call is
/// made again (for at most 10 s); the first other answer.
pub async fn call_once_settled(host_port: &str, tool: &str, args: &str) -> Value {
    for _ in 0..100 {
        let r = call(host_port, tool, args).await;
        let settling = r["status"] == "rejected"
            && r["error_code"] == "DEVICE_BUSY"
            && r["detail"]
                .as_str()
                .is_some_and(|d| d.contains("still settling"));
        if !settling {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{tool} on {host_port}: still settling after 10 s");
}

/// The owner `host_port` reports for `device`, once it reports one.
pub async fn owner(host_port: &str, device: &str) -> Option<String> {
    let state = call(
        host_port,
        "get_device_state",
        &format!(r#"{{"device":"{device}"}}"#),
    )
    .await;
    state["owner"].as_str().map(str::to_string)
}

/// Waits (at most 20 s) until `host_port` reports `want` (or any owner, for `None`) for
/// `device`; the owner it reports.
pub async fn owned_by(host_port: &str, device: &str, want: Option<&str>) -> String {
    for _ in 0..200 {
        if let Some(o) = owner(host_port, device).await
            && want.is_none_or(|w| w == o)
        {
            return o;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{device} never owned by {want:?} as {host_port} sees it");
}

/// The owner of `device` once both gateways report the same one twice, a second apart: the
/// first gateway up holds every device until the second is live, then hands over (between
/// commands, a round later) the ones that fall to the second.
pub async fn settled_owner(a_at: &str, b_at: &str, device: &str) -> String {
    for _ in 0..20 {
        let first = (owner(a_at, device).await, owner(b_at, device).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let then = (owner(a_at, device).await, owner(b_at, device).await);
        if let (Some(x), Some(y)) = &first
            && x == y
            && first == then
        {
            return x.clone();
        }
    }
    panic!("the owner of {device} never settled");
}

/// Waits (bounded) until the journal holds command `id` as acknowledged by its device
/// (`running`), as the gateway at `host_port` reads it. A test that kills a command's owner to
/// see it taken over mid-way must wait for this, not only for the device to move: a write the
/// device took whose acknowledgement the owner had not journaled yet is, honestly, one that
/// "may have arrived" (the heir stops it, `INTERRUPTED`). Under load that gap was 200 ms wide.
pub async fn acked_in_journal(host_port: &str, id: &str) {
    let args = format!(r#"{{"command_id":"{id}","wait_s":0}}"#);
    let mut last = Value::Null;
    for _ in 0..200 {
        last = call(host_port, "get_command_status", &args).await;
        if last["status"] == "running" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("command {id} was never journaled running: {last}");
}

pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig}");
}

/// The first entry of a result's timeline with this event (`Null` when there is none).
pub fn entry(result: &Value, event: &str) -> Value {
    let timeline = result["timeline"].as_array().cloned().unwrap_or_default();
    timeline
        .into_iter()
        .find(|e| e["event"] == event)
        .unwrap_or(Value::Null)
}

/// `get_command_status` arguments that wait up to 10 s for the command to end.
pub fn wait_for(command_id: &str) -> String {
    format!(r#"{{"command_id":"{command_id}","wait_s":10}}"#)
}

/// The end of a scenario: the journal checked whole (`pg::assert_consistent`), the gateways
/// stopped, the database dropped.
pub async fn wind_up(db: super::pg::Database, gateways: &mut [&mut Child]) {
    super::pg::assert_consistent(&db.url).await;
    for c in gateways.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    db.drop().await;
}

/// Two gateways, `a` and `b`, on a database of their own, over the workshop `closedloop sim`
/// serves, its plant file changed by `edit` before they start.
pub struct Two {
    pub db: super::pg::Database,
    pub dir: tempfile::TempDir,
    pub sim: Running,
    pub modbus: String,
    pub a: Child,
    pub a_at: String,
    pub b: Child,
    pub b_at: String,
}

impl Two {
    /// `None` when no PostgreSQL is configured (`CLOSEDLOOP_PG_URL`).
    pub async fn start(test: &str, edit: impl FnOnce(String) -> String) -> Option<Two> {
        let db = super::pg::Database::create(test).await?;
        let dir = tempfile::tempdir().unwrap();
        let (sim, modbus) = start_sim(dir.path(), &db.url, 2);
        let plant = dir.path().join("plant.toml");
        let text = std::fs::read_to_string(&plant).unwrap();
        std::fs::write(&plant, edit(text)).unwrap();
        let (a, a_at) = gateway(dir.path(), "a");
        let (b, b_at) = gateway(dir.path(), "b");
        Some(Two {
            db,
            dir,
            sim,
            modbus,
            a,
            a_at,
            b,
            b_at,
        })
    }

    /// The host:port of the gateway that does not drive `device`, once its lease settled.
    pub async fn not_driving(&self, device: &str) -> &str {
        match settled_owner(&self.a_at, &self.b_at, device).await.as_str() {
            "a" => &self.b_at,
            _ => &self.a_at,
        }
    }

    /// [`wind_up`] of the two.
    pub async fn wind_up(mut self) {
        wind_up(self.db, &mut [&mut self.a, &mut self.b]).await;
    }
}

/// `text` with `line` (which must stand in it exactly once) followed by `added`.
pub fn add_after(text: &str, line: &str, added: &str) -> String {
    assert_eq!(text.matches(line).count(), 1, "{line:?} in the plant");
    text.replace(line, &format!("{line}{added}"))
}

/// A call of `(device, action, params)` accepted at `accepted_at_ms` (on the accepting
/// gateway's clock) and handed to `owner`, as `closedloop serve` journals one: what a test
/// writes to act as a gateway it cannot start (a clock running slow, a session that ended).
pub fn handed_call(
    id: &str,
    (device, action, params): (&str, &str, Value),
    accepted_at_ms: i64,
    owner: &str,
) -> (CommandRow, Vec<EventRow>) {
    let row = CommandRow {
        command_id: id.into(),
        request_id: format!("req_{id}"),
        device: device.into(),
        action: action.into(),
        params,
        status: "accepted".into(),
        verified: false,
        verification: "feedback".into(),
        error_code: None,
        detail: None,
        hint: None,
        evidence: json!({}),
        readback_matched: None,
        accepted_at_ms,
        updated_at_ms: accepted_at_ms,
        deadline_ms: None,
        dispatched: false,
        caller: Some("slow-clock".into()),
        idempotency_key: None,
    };
    let event = |event: &str, data| EventRow {
        at_ms: accepted_at_ms,
        event: event.into(),
        data,
    };
    let events = vec![
        event("received", json!({"request_id": row.request_id})),
        event("accepted", json!({"handed_to": owner})),
    ];
    (row, events)
}
