//! OpenTelemetry traces over OTLP/HTTP (`[server] otlp = "http://collector:4318"`): a span per
//! finished command, posted as protobuf to `<otlp>/v1/traces`, batched once a second.
//!
//! The exporter follows the engine's change feed and turns each command that reached its final
//! status into a span ([`span`]); a tool call whose `_meta` carries a W3C `traceparent` has it
//! journaled on its `received` entry, and its span is that trace's child, so a collector joins
//! the agent's request to the device's answer. No gRPC, no SDK: the protobuf is written out in
//! [`proto`], and the POST is plain HTTP/1.1 (a collector on the gateway's host or network
//! forwards over TLS if it must). A collector that is down loses spans, never commands: export
//! failures are logged and counted (`closedloop_otlp_export_failures_total`).

mod proto;
mod span;

pub use span::TraceParent;

use closedloop_engine::{Change, Engine, Status};
use proto::{Msg, attr_str};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, broadcast};

/// Spans sent in one request at most.
const BATCH: usize = 512;
/// How long spans wait for their batch.
const FLUSH: Duration = Duration::from_secs(1);
/// How long one export may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// A running exporter; [`Exporter::finish`] sends what is pending and stops it.
pub struct Exporter {
    stop: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Exporter {
    /// Starts exporting the spans of `engine`'s commands to the collector at `endpoint`
    /// (`http://host:port`, as the plant file's `otlp` says).
    pub fn start(engine: &Arc<Engine>, endpoint: &str) -> Exporter {
        let stop = Arc::new(Notify::new());
        let target = Target::parse(endpoint);
        let rx = engine.changes();
        let task = tokio::spawn(run(Arc::downgrade(engine), target, rx, Arc::clone(&stop)));
        Exporter { stop, task }
    }

    /// Sends the spans still pending (waiting at most a few seconds), then stops.
    pub async fn finish(self) {
        self.stop.notify_one();
        let _ = tokio::time::timeout(TIMEOUT + FLUSH, self.task).await;
    }
}

/// Where the spans go: `host:port` and the path of the traces endpoint.
struct Target {
    host_port: String,
    path: String,
}

impl Target {
    fn parse(endpoint: &str) -> Target {
        let rest = endpoint.trim_start_matches("http://").trim_end_matches('/');
        let (host_port, base) = rest.split_once('/').unwrap_or((rest, ""));
        let host_port = match host_port.contains(':') {
            true => host_port.to_string(),
            false => format!("{host_port}:4318"),
        };
        let path = match base {
            "" => "/v1/traces".to_string(),
            b => format!("/{b}/v1/traces"),
        };
        Target { host_port, path }
    }
}

async fn run(
    engine: Weak<Engine>,
    target: Target,
    mut rx: broadcast::Receiver<Change>,
    stop: Arc<Notify>,
) {
    let mut pending: Vec<Msg> = Vec::new();
    let mut tick = tokio::time::interval(FLUSH);
    loop {
        let due = tokio::select! {
            change = rx.recv() => match change {
                Ok(Change::Command { command_id, status, elsewhere, .. }) => {
                    // A command another gateway ran is that gateway's span to export.
                    if !elsewhere
                        && Status::parse(&status).is_some_and(Status::is_terminal)
                        && let Some(engine) = engine.upgrade()
                        && let Ok(r) = engine.peek(&command_id).await
                    {
                        pending.push(span::span(&r));
                    }
                    false
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "otlp: fell behind the change feed; spans lost");
                    false
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = tick.tick() => true,
            () = stop.notified() => break,
        };
        if pending.len() >= BATCH || (due && !pending.is_empty()) {
            export(&engine, &target, std::mem::take(&mut pending)).await;
        }
    }
    if !pending.is_empty() {
        export(&engine, &target, pending).await;
    }
}

/// Posts `spans` as one `ExportTraceServiceRequest`; failures are logged and counted.
async fn export(engine: &Weak<Engine>, target: &Target, spans: Vec<Msg>) {
    let (name, instance) = match engine.upgrade() {
        Some(e) => (
            e.plant().server.name.clone(),
            e.shared_instance().map(|(i, _)| i.to_string()),
        ),
        None => (String::new(), None),
    };
    let n = spans.len();
    let body = request(&name, instance.as_deref(), spans);
    match tokio::time::timeout(TIMEOUT, post(target, &body)).await {
        Ok(Ok(())) => {
            metrics::counter!("closedloop_otlp_spans_exported_total").increment(n as u64);
        }
        Ok(Err(e)) => failed(target, n, &e),
        Err(_) => failed(target, n, "no answer within 5 s"),
    }
}

fn failed(target: &Target, n: usize, why: &str) {
    metrics::counter!("closedloop_otlp_export_failures_total").increment(1);
    tracing::warn!(collector = %target.host_port, spans = n, "otlp: export failed: {why}");
}

/// `ExportTraceServiceRequest { resource_spans: [{ resource, scope_spans: [{ scope, spans }] }] }`.
fn request(plant: &str, instance: Option<&str>, spans: Vec<Msg>) -> Vec<u8> {
    let mut resource = Msg::new();
    resource.message(1, &attr_str("service.name", "closedloop"));
    resource.message(1, &attr_str("closedloop.plant", plant));
    if let Some(i) = instance {
        resource.message(1, &attr_str("service.instance.id", i));
    }
    let mut scope = Msg::new();
    scope
        .string(1, "closedloop")
        .string(2, env!("CARGO_PKG_VERSION"));
    let mut scope_spans = Msg::new();
    scope_spans.message(1, &scope);
    for s in &spans {
        scope_spans.message(2, s);
    }
    let mut resource_spans = Msg::new();
    resource_spans
        .message(1, &resource)
        .message(2, &scope_spans);
    let mut req = Msg::new();
    req.message(1, &resource_spans);
    req.into_bytes()
}

/// One HTTP/1.1 POST of `body`; `Err` with the reason unless the collector answered 2xx.
async fn post(target: &Target, body: &[u8]) -> Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect(&target.host_port)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        target.path,
        target.host_port,
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .await
        .and(stream.write_all(body).await)
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .map_err(|e| format!("no answer: {e}"))?;
    let status_line = String::from_utf8_lossy(&answer);
    let status_line = status_line.lines().next().unwrap_or_default();
    match status_line.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') => Ok(()),
        _ => Err(format!("the collector answered {status_line:?}")),
    }
}
