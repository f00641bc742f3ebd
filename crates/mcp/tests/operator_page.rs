//! The operator page (`GET /`): signing in with a token into an HttpOnly cookie that stands for
//! the token on the page's paths only, and — in a real headless Chromium driven through
//! chromedriver — a device going offline shown live, a command started over MCP charted, and a move
//! cancelled from the page's button ending `cancelled` with the simulated slide really stopped.
//!
//! Without chromedriver and Chromium the browser test prints a skip line, unless `CI=true`:
//! then it fails (scripts/system-deps installs them).

mod browser;
mod common;

use closedloop_engine::{Engine, Status};
use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;

const OPERATOR: &str = "operator-secret-9f1c";
const VIEWER: &str = "viewer-secret-27ab";

/// The lamp and a slide slow enough (20 mm/s) to be cancelled mid-travel; with tokens or not.
fn plant(with_tokens: bool) -> String {
    let tokens = format!(
        "[[server.token]]\nname = \"operator\"\nsha256 = \"{}\"\nscopes = [\"read\", \"actuate:lamp\", \"actuate:slide\"]\n\
         [[server.token]]\nname = \"viewer\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
        common::sha256_hex(OPERATOR),
        common::sha256_hex(VIEWER)
    );
    format!(
        "[server]\nname = \"floor\"\njournal = \"sqlite::memory:\"\n{}\n{}\n{}",
        if with_tokens { tokens.as_str() } else { "" },
        common::plants::LAMP,
        common::plants::slide_at(20.0)
    )
}

/// The engine over simulated devices and the HTTP server on a free loopback port.
async fn serve(
    tokens: bool,
) -> (
    String,
    Arc<Engine>,
    std::collections::BTreeMap<String, closedloop_sim::SimDevice>,
) {
    let (engine, sims) = common::engine(&plant(tokens), std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = Server::new(Arc::clone(&engine), "http");
    tokio::spawn(http::serve(
        listener,
        server,
        HttpOptions::default(),
        std::future::pending(),
    ));
    (base, engine, sims)
}

/// Starts `device`'s `action` as an agent would: a `tools/call` over MCP (Streamable HTTP, the
/// operator's token), not waiting; the command id.
async fn submit(base: &str, device: &str, action: &str, args: Value) -> String {
    let agent = common::http_client(&format!("{base}/mcp"), OPERATOR).await;
    let mut args = args.as_object().cloned().unwrap_or_default();
    args.insert("wait_s".into(), json!(0));
    let r = common::call(&agent, &format!("{device}_{action}"), Value::Object(args)).await;
    let r = common::sc(&r).clone();
    assert!(
        matches!(r["status"].as_str(), Some("accepted" | "running")),
        "{r}"
    );
    agent.cancel().await.unwrap();
    r["command_id"].as_str().unwrap().to_string()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `POST /signin` with `token`; the answer.
async fn sign_in(base: &str, token: &str) -> reqwest::Response {
    client()
        .post(format!("{base}/signin"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", token.replace('-', "%2D")))
        .send()
        .await
        .unwrap()
}

/// The `name=value` part of a `Set-Cookie`, and the whole header.
fn cookie_of(r: &reqwest::Response) -> (String, String) {
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let pair = set.split(';').next().unwrap().trim().to_string();
    (pair, set)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_gives_an_http_only_cookie_that_stands_for_the_token_on_the_page_only() {
    let (base, _engine, _sims) = serve(true).await;
    let http = client();
    let get = |path: &str, cookie: Option<&str>| {
        let mut req = http.get(format!("{base}{path}"));
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        req.send()
    };

    // Not signed in: the data is refused, `/` is the sign-in form.
    for path in ["/page/state", "/page/commands", "/page/events"] {
        let r = get(path, None).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let form = get("/", None).await.unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    let html = form.text().await.unwrap();
    assert!(
        html.contains(r#"action="/signin""#) && html.contains(r#"name="token""#),
        "{html}"
    );

    // A wrong token: the form again, saying why; no cookie.
    let wrong = sign_in(&base, "not-a-token").await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(!wrong.headers().contains_key("set-cookie"));
    assert!(
        wrong
            .text()
            .await
            .unwrap()
            .contains("matches no [[server.token]]")
    );

    // The viewer signs in: an HttpOnly, SameSite=Strict cookie for the whole site.
    let signed = sign_in(&base, VIEWER).await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    assert_eq!(signed.headers()["location"], "/");
    let (viewer, set) = cookie_of(&signed);
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.split("; ").any(|a| a == attr), "{attr} missing: {set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: no Secure: {set}");
    let app = get("/", Some(&viewer)).await.unwrap().text().await.unwrap();
    assert!(app.contains("/page/app.js"), "{app}");
    let state: Value = serde_json::from_str(
        &get("/page/state", Some(&viewer))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state["caller"], "viewer");
    assert_eq!(state["devices"][0]["info"]["device"], "lamp");
    assert_eq!(state["devices"][1]["may_cancel"], false);

    // The cookie is not a token for the MCP endpoint or the metrics.
    for path in ["/mcp", "/metrics"] {
        let r = get(path, Some(&viewer)).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
    }

    // Cancel: needs the page's header, and actuate on the device.
    let id = submit(&base, "slide", "move_to", json!({"target_mm": 300.0})).await;
    let cancel = |cookie: String, header: bool| {
        let mut req = http
            .post(format!("{base}/page/commands/{id}/cancel"))
            .header("cookie", cookie);
        if header {
            req = req.header(http::ACTION_HEADER, "cancel");
        }
        req.send()
    };
    let r = cancel(viewer.clone(), true).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("actuate:slide"));
    let (operator, _) = cookie_of(&sign_in(&base, OPERATOR).await);
    let r = cancel(operator.clone(), false).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "no header, no cancel");
    let r = cancel(operator.clone(), true).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let done: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(done["status"], "cancelled", "{done}");

    // Signing out expires the cookie.
    let out = http
        .post(format!("{base}/signout"))
        .header("cookie", &operator)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::SEE_OTHER);
    assert!(cookie_of(&out).1.contains("Max-Age=0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_a_loopback_browser_needs_no_sign_in() {
    let (base, _engine, _sims) = serve(false).await;
    let http = client();
    let app = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(app.status(), StatusCode::OK);
    let csp = app.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(app.text().await.unwrap().contains("/page/app.js"));
    let state = http.get(format!("{base}/page/state")).send().await.unwrap();
    assert_eq!(state.status(), StatusCode::OK);
    let state: Value = serde_json::from_str(&state.text().await.unwrap()).unwrap();
    assert_eq!(state["needs_sign_in"], false);
    let events = http
        .get(format!("{base}/page/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(events.headers()["content-type"], "text/event-stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_the_page_shows_devices_and_commands_live_and_cancels_a_move() {
    let Some(bins) = browser::binaries_or_skip() else {
        return;
    };
    let (base, engine, sims) = serve(true).await;
    let tmp = tempfile::tempdir().unwrap();
    let driver = browser::Driver::start(
        &bins.chromedriver,
        &browser::artifacts().join("chromedriver.log"),
    )
    .await;
    let failure = browser::artifacts().join("failure.png");
    let s = driver
        .session(&bins.chromium, &tmp.path().join("profile"), &failure)
        .await;

    s.viewport(1280, 800).await;
    sign_in_through_the_form(&s, &base).await;

    // A switch that completes: its chart draws the reading that decided it before the verdict.
    let id = submit(&base, "lamp", "switch", json!({"on": true})).await;
    let done = engine
        .status(&id, std::time::Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(done.status, Status::Completed, "{done:?}");
    deciding_reading_charted_before_the_verdict(&s, &id, &done.evidence).await;

    // The lamp loses power: the page shows it offline without a reload.
    sims["lamp"].inject(closedloop_sim::FaultSpec::now(
        closedloop_sim::Fault::PowerOff,
    ));
    let offline = "const li = document.querySelector(\".device[data-device='lamp']\"); \
                   return !!li && li.dataset.liveness === 'offline' && li.querySelector('.live').textContent === 'offline'";
    s.wait_until("the lamp offline", offline, json!([])).await;

    // A move started by an agent over MCP appears, and its timeline is charted.
    let id = submit(&base, "slide", "move_to", json!({"target_mm": 300.0})).await;
    charted_while_running(&s, &id).await;
    browser::screenshot(&s, "running.png", 1000).await;

    cancelled_from_the_page(&s, &id).await;
    let chart = "document.getElementById('chart').scrollIntoView({block: 'end'})";
    s.run(chart, json!([])).await;
    browser::screenshot(&s, "cancelled-chart.png", 1000).await;

    // Ground truth: the engine says cancelled, and the simulated slide really stopped short.
    let result = engine.peek(&id).await.unwrap();
    assert_eq!(result.status, Status::Cancelled, "{result:?}");
    let truth = sims["slide"].peek();
    assert_eq!(truth.moving, Some(false), "{truth:?}");
    assert!(truth.position_mm.is_some_and(|p| p < 300.0), "{truth:?}");

    filtered(&s, &id).await;

    let wide = browser::screenshot(&s, "cancelled-1280.png", 1000).await;
    s.viewport(390, 844).await;
    let fits = "const d = document.documentElement; \
                return window.innerWidth < 500 && d.scrollWidth <= d.clientWidth";
    s.wait_until("no sideways scrolling at phone width", fits, json!([]))
        .await;
    let narrow = browser::screenshot(&s, "phone.png", 300).await;
    eprintln!("screenshots: {} {}", wide.display(), narrow.display());
    s.end().await;
    drop(driver);
}

/// Signs in at `/` through the form, as a person would, and waits for the live page.
async fn sign_in_through_the_form(s: &browser::Session, base: &str) {
    s.goto(&format!("{base}/")).await;
    let token = s.wait_for("#token").await;
    s.type_into(&token, OPERATOR).await;
    s.click_css("form[action='/signin'] button[type=submit]")
        .await;
    s.wait_for(".device[data-device='slide'] tr[data-signal='position_mm']")
        .await;
    let cookie = s.run("return document.cookie", json!([])).await;
    let why = "the sign-in cookie is HttpOnly: scripts cannot read it";
    assert_eq!(cookie, json!(""), "{why}");
    let live = "return document.getElementById('link').dataset.state === 'live'";
    s.wait_until("the live feed connected", live, json!([]))
        .await;
}

/// The script that answers the status the list shows for the command `arguments[0]`.
const ROW_STATUS: &str =
    "return document.querySelector(`tr[data-command-id='${arguments[0]}']`)?.dataset.status";

/// Waits for the move `id` running in the list, opens it, and waits for its chart: position
/// readings (several) and the device's acknowledgement.
async fn charted_while_running(s: &browser::Session, id: &str) {
    let running = format!("{ROW_STATUS} === 'running'");
    s.wait_until("the move running in the list", &running, json!([id]))
        .await;
    s.click_css(&format!("tr[data-command-id='{id}'] button.show"))
        .await;
    let charted = "const d = document.getElementById('detail'); \
                   return !d.hidden && d.dataset.commandId === arguments[0] \
                     && !!d.querySelector(\"#chart svg polyline[data-series='position_mm']\") \
                     && !!d.querySelector(\"#chart svg line[data-mark='device_ack']\")";
    let what = "the move's chart with its readings and ack";
    s.wait_until(what, charted, json!([id])).await;
    let moved = "const p = document.querySelector(\"#chart polyline[data-series='position_mm']\"); \
                 return p.getAttribute('points').split(' ').length >= 3";
    s.wait_until("several position readings on the chart", moved, json!([]))
        .await;
}

/// Opens the completed command `id` and checks its chart against the `evidence` that decided it:
/// each criterion signal's last plotted value is the evidence's, and that reading's dot stands
/// before the verdict's marker.
async fn deciding_reading_charted_before_the_verdict(
    s: &browser::Session,
    id: &str,
    evidence: &Value,
) {
    let completed = format!("{ROW_STATUS} === 'completed'");
    s.wait_until("the switch completed in the list", &completed, json!([id]))
        .await;
    s.click_css(&format!("tr[data-command-id='{id}'] button.show"))
        .await;
    let verdict = "const d = document.getElementById('detail'); \
                   return d.dataset.commandId === arguments[0] \
                     && !!d.querySelector(\"#chart line[data-mark='completed']\")";
    s.wait_until("the completed verdict on the chart", verdict, json!([id]))
        .await;
    let signals = evidence.as_object().expect("evidence");
    assert!(!signals.is_empty(), "{evidence}");
    for (name, reading) in signals {
        let chart = "const [name] = arguments; \
            const line = document.querySelector(`#chart polyline[data-series='${name}']`); \
            const dots = [...document.querySelectorAll(`#chart circle[data-series='${name}']`)]; \
            const mark = document.querySelector(\"#chart line[data-mark='completed']\"); \
            return {last: line.dataset.last, at: dots[dots.length - 1].dataset.at, \
                    dot: Number(dots[dots.length - 1].getAttribute('cx')), \
                    verdict: Number(mark.getAttribute('x1'))};";
        let drawn = s.run(chart, json!([name])).await;
        assert_eq!(
            drawn["last"],
            reading["value"].to_string(),
            "{name}: {drawn} vs {reading}"
        );
        let read_at = reading["at"].as_str().unwrap();
        let drawn_at = drawn["at"].as_str().unwrap();
        assert_eq!(
            &drawn_at[..23],
            &read_at[..23],
            "{name}: drawn at its read time"
        );
        let (dot, verdict) = (
            drawn["dot"].as_f64().unwrap(),
            drawn["verdict"].as_f64().unwrap(),
        );
        assert!(
            dot < verdict,
            "{name}: the deciding reading ({dot}) is not before the verdict ({verdict})"
        );
    }
    browser::screenshot(s, "completed-chart.png", 1000).await;
}

/// Cancels `id` from the keyboard — Tab from the status filter to its row's Cancel button,
/// which shows its focus, then Enter — accepts the confirmation, and waits for `cancelled` in
/// the list and as the chart's verdict.
async fn cancelled_from_the_page(s: &browser::Session, id: &str) {
    s.run("document.getElementById('f-status').focus()", json!([]))
        .await;
    let on_cancel = "const a = document.activeElement; \
                     return a.matches('button.cancel') && a.dataset.commandId === arguments[0]";
    for _ in 0..10 {
        if s.run(on_cancel, json!([id])).await == json!(true) {
            break;
        }
        s.press('\u{E004}').await;
    }
    let focus = "const a = document.activeElement; \
                 return a.matches(':focus-visible') && getComputedStyle(a).outlineStyle !== 'none' \
                   && a.dataset.commandId === arguments[0]";
    let what = "the Cancel button reached with Tab, its focus visible";
    s.wait_until(what, focus, json!([id])).await;
    s.press('\u{E007}').await;
    let asked = s.dialog_text().await;
    assert!(asked.starts_with("Cancel slide move_to"), "{asked}");
    s.accept_dialog().await;
    let cancelled = format!("{ROW_STATUS} === 'cancelled'");
    s.wait_until("the move cancelled in the list", &cancelled, json!([id]))
        .await;
    let verdict = "const d = document.getElementById('detail'); \
                   return d.dataset.status === 'cancelled' \
                     && !!d.querySelector(\"#chart line[data-mark='cancelled']\")";
    s.wait_until("the cancelled verdict on the chart", verdict, json!([]))
        .await;
}

/// The list's filters: each one that excludes the cancelled move `id` empties the list, the
/// one that matches it brings it back.
async fn filtered(s: &browser::Session, id: &str) {
    let set = "const [id, value] = arguments; const f = document.getElementById(id); \
               f.value = value; f.dispatchEvent(new Event('change'));";
    let empty = "return !document.getElementById('commands-empty').hidden";
    let shown = "return document.getElementById('commands-empty').hidden && \
         document.querySelector(`tr[data-command-id='${arguments[0]}']`)?.dataset.status === 'cancelled'";
    s.run(set, json!(["f-status", "running"])).await;
    s.wait_until("no running command listed", empty, json!([]))
        .await;
    s.run(set, json!(["f-status", "cancelled"])).await;
    s.wait_until("the cancelled move listed", shown, json!([id]))
        .await;
    s.run(set, json!(["f-device", "lamp"])).await;
    s.wait_until("no cancelled lamp command listed", empty, json!([]))
        .await;
    s.run(set, json!(["f-device", ""])).await;
    s.run(set, json!(["f-status", ""])).await;
    s.wait_until("the move listed unfiltered", shown, json!([id]))
        .await;
}
