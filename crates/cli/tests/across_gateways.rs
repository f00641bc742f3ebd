//! What a client of one gateway sees of a command another gateway runs (`CLOSEDLOOP_PG_URL`):
//! two `closedloop serve --http` processes on one PostgreSQL journal over the Modbus workshop
//! `closedloop sim` serves, and rmcp's own client over Streamable HTTP on the gateway that does
//! not drive the slide. A Tasks client's task follows the owner's run to its end, and its
//! `tasks/cancel` stops the slide; a subscriber to `command://{id}` is told as the owner's run
//! moves on; the operator page of the other gateway follows a command the owner was sent
//! directly. Ground truth is the slide's position read from the simulator's registers.

mod common;

use common::gateways::{entry, gateway, settled_owner, start_sim};
use common::pg::Database;
use common::tasks::{Tasks, config, params, task_end, tasks_client};
use common::truth::{slide_at_rest, slide_beyond, slide_mm};
use rmcp::model::{
    CallToolResponse, CancelTaskParams, ReadResourceRequestParams, ResourceContents,
    ResourceUpdatedNotificationParam, SubscribeRequestParams, TaskStatus,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Two gateways over the workshop: the sim's Modbus address and the host:port of the gateway
/// that does not own the slide.
struct Pair {
    _dir: tempfile::TempDir,
    _sim: common::Running,
    modbus: String,
    gateways: [std::process::Child; 2],
    owner: String,
    owner_at: String,
    other_at: String,
}

async fn pair(db: &Database) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let (sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (a, a_at) = gateway(dir.path(), "a");
    let (b, b_at) = gateway(dir.path(), "b");
    let owner = settled_owner(&a_at, &b_at, "slide").await;
    let (owner_at, other_at) = if owner == "a" {
        (a_at, b_at)
    } else {
        (b_at, a_at)
    };
    Pair {
        _dir: dir,
        _sim: sim,
        modbus,
        gateways: [a, b],
        owner,
        owner_at,
        other_at,
    }
}

/// Starts `slide_move_to target_mm` as a task; its id.
async fn move_task(c: &Tasks, target_mm: f64) -> String {
    let p = params("slide_move_to", json!({"target_mm": target_mm}));
    let CallToolResponse::Task(created) = c.call_tool_once(p).await.unwrap() else {
        panic!("a Tasks client gets a task for an action");
    };
    assert_eq!(created.task.status, TaskStatus::Working, "{created:?}");
    created.task.task_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_where_the_call_is_handed_on_follows_the_owners_run_and_its_cancel_stops_the_slide()
{
    let Some(db) = Database::create("across_tasks").await else {
        return;
    };
    let mut p = pair(&db).await;
    let c = tasks_client(&p.other_at).await;

    let id = move_task(&c, 30.0).await;
    let (status, result) = task_end(&c, &id).await;
    assert_eq!(status, TaskStatus::Completed);
    let result = result.expect("a completed task carries the tool result");
    let sc = &result["structuredContent"];
    assert_eq!(
        (sc["status"].as_str(), result["isError"].as_bool()),
        (Some("completed"), Some(false)),
        "{sc}"
    );
    assert_eq!(entry(sc, "accepted")["handed_to"], p.owner.as_str(), "{sc}");
    assert_eq!(entry(sc, "claimed")["by"], p.owner.as_str(), "{sc}");
    let at = slide_mm(&p.modbus).await;
    assert!(
        (at - 30.0).abs() <= 0.2,
        "the task completed with the slide at {at} mm"
    );

    // A second move, cancelled as a task while it runs on the owner: the slide stops short.
    let id = move_task(&c, 250.0).await;
    slide_beyond(&p.modbus, 50.0).await;
    c.cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    let (status, _) = task_end(&c, &id).await;
    assert_eq!(status, TaskStatus::Cancelled);
    let rest = slide_at_rest(&p.modbus).await;
    assert!(
        rest > 50.0 && rest < 249.0,
        "cancelled, yet the slide rests at {rest} mm"
    );
    c.cancel().await.unwrap();
    let [a, b] = &mut p.gateways;
    common::gateways::wind_up(db, &mut [a, b]).await;
}

/// The URIs of every `notifications/resources/updated` the client received, in order.
#[derive(Clone, Default)]
struct Updates(Arc<Mutex<Vec<String>>>);

impl ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        p: ResourceUpdatedNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(p.uri);
    }
}

impl Updates {
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

type Watching = RunningService<RoleClient, Updates>;

/// `resources/read` of a JSON resource.
async fn read(c: &Watching, uri: &str) -> Value {
    let r = c
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|e| panic!("{uri}: {e}"));
    match &r.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => serde_json::from_str(text).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_at_one_gateway_is_told_as_the_owner_runs_the_command() {
    let Some(db) = Database::create("across_subscribe").await else {
        return;
    };
    let mut p = pair(&db).await;
    let updates = Updates::default();
    // A 2025-era session: subscriptions are told on its stream.
    let c = updates
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config(
            &p.other_at,
        )))
        .await
        .unwrap();
    let r = c
        .call_tool(params(
            "slide_move_to",
            json!({"target_mm": 200, "wait_s": 0}),
        ))
        .await
        .unwrap();
    let sc = r.structured_content.expect("structured content");
    assert_eq!(sc["status"], "accepted", "{sc}");
    let uri = format!("command://{}", sc["command_id"].as_str().unwrap());
    #[allow(deprecated)]
    c.subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .unwrap();

    // Told (bounded: 15 s), with nothing asked meanwhile, until the owner has ended it.
    let mut ended = Value::Null;
    let mut handled = 0;
    for _ in 0..150 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let told = updates.count();
        if told > handled {
            handled = told;
            let now = read(&c, &uri).await;
            if now["status"] != "accepted" && now["status"] != "running" {
                ended = now;
                break;
            }
        }
    }
    assert_eq!(
        ended["status"], "completed",
        "never told of the end: {ended}"
    );
    assert_eq!(entry(&ended, "claimed")["by"], p.owner.as_str(), "{ended}");
    let at = slide_mm(&p.modbus).await;
    assert!(
        (at - 200.0).abs() <= 0.2,
        "completed with the slide at {at} mm"
    );
    assert!(
        updates.0.lock().unwrap().iter().all(|u| *u == uri),
        "updates of other resources"
    );
    c.cancel().await.unwrap();
    let [a, b] = &mut p.gateways;
    common::gateways::wind_up(db, &mut [a, b]).await;
}

/// `GET path` on `host_port`: the body of the answer.
async fn get(host_port: &str, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n");
    let mut stream = tokio::net::TcpStream::connect(host_port).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let at = answer.find("\r\n\r\n").expect("a body") + 4;
    answer[at..].to_string()
}

/// The operator page's live feed (`GET /page/events`) of one gateway, read as it comes.
struct Feed {
    stream: tokio::net::TcpStream,
    /// Bytes read and not yet taken apart (the headers, then the body's chunks).
    raw: Vec<u8>,
    /// The body's text so far, chunk framing removed.
    text: String,
    in_body: bool,
}

impl Feed {
    async fn open(host_port: &str) -> Feed {
        let request = format!(
            "GET /page/events HTTP/1.1\r\nHost: {host_port}\r\nAccept: text/event-stream\r\n\r\n"
        );
        let mut stream = tokio::net::TcpStream::connect(host_port).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        Feed {
            stream,
            raw: Vec::new(),
            text: String::new(),
            in_body: false,
        }
    }

    /// Reads on (bounded: 15 s) until an event's data line satisfies `want`; that data.
    async fn until(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let event: String = self.text.drain(..end + 2).collect();
                let data = event.lines().find_map(|l| l.strip_prefix("data: "));
                if let Some(v) = data.and_then(|d| serde_json::from_str(d).ok())
                    && want(&v)
                {
                    return v;
                }
            }
            let mut buf = [0u8; 8192];
            let read = tokio::time::timeout_at(deadline, self.stream.read(&mut buf));
            let n = read.await.expect("no such event within 15 s").unwrap();
            assert!(n > 0, "the feed closed");
            self.raw.extend_from_slice(&buf[..n]);
            self.unframe();
        }
    }

    /// Moves what has arrived of the body from `raw` to `text`: the headers skipped, each
    /// chunk of the chunked transfer coding taken once it is whole.
    fn unframe(&mut self) {
        if !self.in_body {
            let Some(at) = self.raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                return;
            };
            assert!(self.raw.starts_with(b"HTTP/1.1 200"), "not a feed");
            self.raw.drain(..at + 4);
            self.in_body = true;
        }
        while let Some(eol) = self.raw.windows(2).position(|w| w == b"\r\n") {
            let size = std::str::from_utf8(&self.raw[..eol]).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            if self.raw.len() < eol + 2 + size + 2 {
                return;
            }
            let chunk = self.raw[eol + 2..eol + 2 + size].to_vec();
            self.text.push_str(&String::from_utf8(chunk).unwrap());
            self.raw.drain(..eol + 2 + size + 2);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_page_of_one_gateway_follows_a_command_the_other_runs() {
    let Some(db) = Database::create("across_page").await else {
        return;
    };
    let mut p = pair(&db).await;
    let owner_at = p.owner_at.clone();
    let mut feed = Feed::open(&p.other_at).await;
    // The slide's owner shows in the other gateway's device events.
    let owned = feed.until(|v| v["device"] == "slide").await;
    assert_eq!(owned["state"]["owner"], p.owner.as_str(), "{owned}");

    // Sent to the owner: nothing of it passes through the other gateway but the journal.
    let move_to = r#"{"target_mm":180,"wait_s":0}"#;
    let r = common::gateways::call(&owner_at, "slide_move_to", move_to).await;
    assert_eq!(r["status"], "accepted", "{r}");
    let id = r["command_id"].as_str().unwrap().to_string();
    let told = feed
        .until(|v| v["command_id"] == id.as_str() && v["status"] == "completed")
        .await;
    assert_eq!(told["device"], "slide", "{told}");
    let shown: Value =
        serde_json::from_str(&get(&p.other_at, &format!("/page/commands/{id}")).await).unwrap();
    assert_eq!(shown["status"], "completed", "{shown}");
    assert!(!entry(&shown, "dispatched").is_null(), "{shown}");
    let at = slide_mm(&p.modbus).await;
    assert!(
        (at - 180.0).abs() <= 0.2,
        "completed with the slide at {at} mm"
    );
    let [a, b] = &mut p.gateways;
    common::gateways::wind_up(db, &mut [a, b]).await;
}
