//! `GET /page/events`: the operator page's live feed, as Server-Sent Events.
//!
//! One task per open page writes the stream: a `command` event for every [`Change`] of the
//! engine (the page then fetches what it shows of that command), and a `device` event with a
//! device's whole state when its reading changed (its liveness, a value, its alarms or owner),
//! or at least once a second while it is read (so the ages the page shows stay true). Device
//! watches are looked at every [`TICK`], not on every read cycle: a device polled every 20 ms
//! would otherwise push fifty events a second to every page.
//!
//! The task ends when the page goes away (its body dropped), when the server shuts down, or
//! when the engine's change feed closes.

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use closedloop_engine::{Change, Engine, Snapshot};
use http_body::Frame;
use serde_json::json;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How often device watches are looked at.
const TICK: Duration = Duration::from_millis(250);
/// A device read since its last event is sent again after this long even if nothing changed.
const RESEND: Duration = Duration::from_secs(1);
/// A comment line this often keeps the connection from counting as idle (`idle_timeout`).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The most devices one page follows: a hall of thousands is not one page.
pub(super) const MAX_DEVICES: usize = 500;

/// The SSE response, fed by a task of its own until the client or the server goes away.
pub(super) fn response(engine: Arc<Engine>, stop: CancellationToken) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let changes = engine.changes();
    tokio::spawn(feed(engine, changes, tx, stop));
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    (headers, Body::new(EventBody(rx))).into_response()
}

/// One followed device: its watch and what was last sent of it.
struct Followed {
    id: String,
    watch: watch::Receiver<Snapshot>,
    sent: Option<(String, Instant)>,
}

async fn feed(
    engine: Arc<Engine>,
    mut changes: broadcast::Receiver<Change>,
    tx: mpsc::Sender<Bytes>,
    stop: CancellationToken,
) {
    let mut devices: Vec<Followed> = engine
        .devices(0, MAX_DEVICES)
        .into_iter()
        .filter_map(|d| {
            let watch = engine.watch_device(&d.device)?;
            Some(Followed {
                id: d.device,
                watch,
                sent: None,
            })
        })
        .collect();
    let mut tick = tokio::time::interval(TICK);
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    loop {
        let out: Vec<Bytes> = tokio::select! {
            () = stop.cancelled() => return,
            () = tx.closed() => return,
            change = changes.recv() => match change {
                Ok(Change::Command { command_id, device, status, .. }) => {
                    let data = json!({"command_id": command_id, "device": device, "status": status});
                    vec![event("command", &data)]
                }
                // Fell behind: the page refetches everything rather than miss a change.
                Err(broadcast::error::RecvError::Lagged(_)) => vec![event("resync", &json!({}))],
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = tick.tick() => devices.iter_mut().filter_map(|d| device_event(&engine, d)).collect(),
            _ = keep_alive.tick() => vec![Bytes::from_static(b": keep-alive\n\n")],
        };
        for bytes in out {
            if tx.send(bytes).await.is_err() {
                return;
            }
        }
    }
}

/// The `device` event for `d`, if it has something new to say.
fn device_event(engine: &Engine, d: &mut Followed) -> Option<Bytes> {
    let read = d.watch.has_changed().unwrap_or(false);
    d.watch.borrow_and_update();
    let stale = d.sent.as_ref().is_none_or(|(_, at)| at.elapsed() >= RESEND);
    if !read && !stale {
        return None;
    }
    let state = engine.device_state(&d.id)?;
    // What the page shows, without the ages that change with every read.
    let values: serde_json::Map<String, serde_json::Value> = state
        .signals
        .iter()
        .map(|(k, s)| (k.clone(), s.value.clone()))
        .collect();
    let digest = json!([
        state.liveness,
        values,
        state.alarms,
        state.owner,
        state.detail
    ])
    .to_string();
    let same = d.sent.as_ref().is_some_and(|(last, _)| *last == digest);
    if same && !stale {
        return None;
    }
    d.sent = Some((digest, Instant::now()));
    Some(event("device", &json!({"device": d.id, "state": state})))
}

/// One SSE event: its name and its data as one line of JSON.
fn event(name: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// The response body: whatever the feed task sends, until it stops.
struct EventBody(mpsc::Receiver<Bytes>);

impl http_body::Body for EventBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_its_name_and_one_line_of_json() {
        let e = event("command", &json!({"a": "x\ny"}));
        assert_eq!(&e[..], b"event: command\ndata: {\"a\":\"x\\ny\"}\n\n");
    }
}
