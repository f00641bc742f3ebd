//! The operator page's ages of values a broker retained, in a real headless Chromium against a
//! real Mosquitto: a retained message whose payload says when it was taken is shown as old as
//! that and its age goes on between events; one without a time says its age is unknown, and
//! keeps saying so at every tick of the page's clock (it once turned into "NaN min").
//!
//! Without chromedriver and Chromium the test prints a skip line, unless `CI=true`: then it
//! fails (scripts/system-deps installs them, and Mosquitto).

mod browser;
mod common;

use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use closedloop_mqtt::testing::{Mosquitto, publish_retained};
use serde_json::json;
use std::sync::Arc;

/// A door contact whose payload carries its time, and a light whose payload does not.
fn plant(broker: &str) -> String {
    format!(
        r#"[server]
name = "floor"
journal = "sqlite::memory:"

[[device]]
id = "door"
description = "Door contact on an MQTT board that stamps its messages"
driver = {{ kind = "mqtt", broker = "{broker}", client_id = "closedloop-page" }}
liveness = {{ status_topic = "hall/door/status", max_silence_s = 60 }}
[device.signals]
open = {{ topic = "hall/door/state", json = "/open", time_json = "/time", type = "bool" }}

[[device]]
id = "hall_light"
description = "Hall light on an MQTT relay"
driver = {{ kind = "mqtt", broker = "{broker}", client_id = "closedloop-page" }}
liveness = {{ status_topic = "hall/light/status", max_silence_s = 60 }}
[device.signals]
on = {{ topic = "hall/light/state", json = "/on", type = "bool" }}
"#
    )
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.unwrap().as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_a_retained_value_is_as_old_as_its_payload_says_or_of_unknown_age() {
    let Some(bins) = browser::binaries_or_skip() else {
        return;
    };
    let broker = Mosquitto::start().await;
    let _board = retain_the_door_and_the_light(&broker).await;

    let (engine, _sims) = common::engine(&plant(&broker.url), std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = Server::new(Arc::clone(&engine), "http");
    let serving = http::serve(
        listener,
        server,
        HttpOptions::default(),
        std::future::pending(),
    );
    tokio::spawn(serving);

    let tmp = tempfile::tempdir().unwrap();
    let (driver, s) = browser::open(&bins, &tmp.path().join("profile")).await;
    s.goto(&format!("{base}/")).await;
    s.wait_until(
        "the door 3 min old",
        DATED,
        json!(["door", "open", "3 min, retained"]),
    )
    .await;
    s.wait_until(
        "the light's row",
        DATED,
        json!(["hall_light", "on", "retained, age unknown"]),
    )
    .await;
    no_tick_writes_nan(&s).await;
    the_ages_stay_as_retained(&s).await;
    browser::screenshot(&s, "retained.png", 300).await;
    s.end().await;
    drop(driver);
}

/// The age text of the row of device `arguments[0]`'s signal `arguments[1]`, or null.
const AGE: &str = "const [d, sig] = arguments; \
               const tr = document.querySelector(`.device[data-device='${d}'] tr[data-signal='${sig}']`); \
               return tr ? tr.querySelector('.age').textContent : null";

/// Whether that row's age text is `arguments[2]`.
const DATED: &str = "const [d, sig, want] = arguments; \
                 const tr = document.querySelector(`.device[data-device='${d}'] tr[data-signal='${sig}']`); \
                 return !!tr && tr.querySelector('.age').textContent === want";

/// Left behind before the gateway started: the door's taken three minutes ago, and the light's
/// without a time. The board that retained them (kept connected for the test).
async fn retain_the_door_and_the_light(broker: &Mosquitto) -> closedloop_mqtt::MqttBroker {
    let board = broker.client("page-retained-board").await;
    let door = json!({"open": false, "time": now_ms() - 180_000}).to_string();
    publish_retained(&board, "hall/door/state", &door)
        .await
        .unwrap();
    publish_retained(&board, "hall/light/state", r#"{"on": true}"#)
        .await
        .unwrap();
    board
}

/// Let the page's clock tick (every second) twice, and keep every age text it writes: the
/// dated age goes on, the undated one has none to go on (a re-render by a later event must
/// not hide a tick's text for a moment).
async fn no_tick_writes_nan(s: &browser::Session) {
    let watch = "window.agesWritten = []; new MutationObserver(() => { \
                   for (const td of document.querySelectorAll('tr[data-signal] .age')) \
                     window.agesWritten.push(td.textContent); \
                 }).observe(document.body, {subtree: true, childList: true, characterData: true}); \
                 return performance.now()";
    let t0 = s.run(watch, json!([])).await;
    let ticked = "return performance.now() > arguments[0] + 2500";
    s.wait_until("two ticks", ticked, json!([t0])).await;
    let written = s.run("return window.agesWritten", json!([])).await;
    let written: Vec<&str> = written
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(!written.is_empty(), "the page wrote no ages in 2.5 s");
    let bad: Vec<&&str> = written.iter().filter(|t| t.contains("NaN")).collect();
    assert!(bad.is_empty(), "ages written: {written:?}");
}

/// After the ticks: the light still of unknown age, the door still 3 min old and saying when
/// it was taken, and no NaN anywhere on the page.
async fn the_ages_stay_as_retained(s: &browser::Session) {
    let light = s.run(AGE, json!(["hall_light", "on"])).await;
    assert_eq!(light, "retained, age unknown", "no age to go on");
    let door_age = s.run(AGE, json!(["door", "open"])).await;
    assert_eq!(door_age, "3 min, retained");
    let title = "return document.querySelector(\".device[data-device='door'] tr[data-signal='open'] .age\").title";
    let title = s.run(title, json!([])).await;
    assert!(
        title
            .as_str()
            .unwrap()
            .starts_with("a retained message, taken at "),
        "{title}"
    );
    let body = s.run("return document.body.innerText", json!([])).await;
    assert!(!body.as_str().unwrap().contains("NaN"), "{body}");
}
