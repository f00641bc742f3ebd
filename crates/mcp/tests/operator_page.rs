//! The operator page (`GET /`): signing in with a token into an HttpOnly cookie that stands for
//! the token on the page's paths only, and — in a real headless Chromium driven through
//! chromedriver — a device going offline shown live, a command started over MCP charted, and a move
//! cancelled from the page's button ending `cancelled` with the simulated slide really stopped.
//!
//! Without chromedriver and Chromium the browser test prints a skip line, unless `CI=true`:
//! then it fails (scripts/system-deps installs them).

mod browser;
mod common;

use browser::{commands, reading};
use closedloop_engine::{Engine, Status};
use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;

const OPERATOR: &str = "operator-secret-9f1c";
const VIEWER: &str = "viewer-secret-27ab";

/// A light on an MQTT broker that is not there: a device that pushes its values, never polled.
const HALL_LIGHT: &str = r#"
[[device]]
id = "hall_light"
description = "Hall light on an MQTT relay"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:1", client_id = "closedloop-page-test" }
liveness = { status_topic = "hall/light/status", max_silence_s = 1.5 }
[device.signals]
on = { topic = "hall/light/state", json = "/on", type = "bool" }
"#;

/// The lamp, a slide slow enough (20 mm/s) to be cancelled mid-travel and an MQTT light; with
/// tokens or not.
fn plant(with_tokens: bool) -> String {
    let tokens = format!(
        "[[server.token]]\nname = \"operator\"\nsha256 = \"{}\"\nscopes = [\"read\", \"actuate:lamp\", \"actuate:slide\"]\n\
         [[server.token]]\nname = \"viewer\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
        common::sha256_hex(OPERATOR),
        common::sha256_hex(VIEWER)
    );
    format!(
        "[server]\nname = \"floor\"\njournal = \"sqlite::memory:\"\n{}\n{}\n{}\n{HALL_LIGHT}",
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
            .contains("That access code is not known here")
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
    state_as_the_viewer(
        &get("/page/state", Some(&viewer))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );

    // The cookie is not a token for the MCP endpoint or the metrics.
    for path in ["/mcp", "/metrics"] {
        let r = get(path, Some(&viewer)).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
    }

    let operator = cancel_needs_the_header_and_actuate(&base, &viewer).await;

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

/// A cancel from the page needs its header and `actuate` on the device: the `viewer` cookie is
/// refused, the operator's without the header too, with it the move ends cancelled. The
/// operator's cookie.
async fn cancel_needs_the_header_and_actuate(base: &str, viewer: &str) -> String {
    let id = submit(base, "slide", "move_to", json!({"target_mm": 300.0})).await;
    let cancel = |cookie: String, header: bool| {
        let mut req = client()
            .post(format!("{base}/page/commands/{id}/cancel"))
            .header("cookie", cookie);
        if header {
            req = req.header(http::ACTION_HEADER, "cancel");
        }
        req.send()
    };
    let r = cancel(viewer.to_string(), true).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().contains("actuate:slide"));
    let (operator, _) = cookie_of(&sign_in(base, OPERATOR).await);
    let r = cancel(operator.clone(), false).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN, "no header, no cancel");
    let r = cancel(operator.clone(), true).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let done: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(done["status"], "cancelled", "{done}");
    operator
}

/// `/page/state` as the viewer sees it: signed in by name, may cancel nothing; the slide polled
/// every 20 ms, the MQTT light pushing its values.
fn state_as_the_viewer(body: &str) {
    let state: Value = serde_json::from_str(body).unwrap();
    assert_eq!(state["caller"], "viewer");
    assert_eq!(state["local_user"], false);
    assert_eq!(state["devices"][0]["info"]["device"], "lamp");
    assert_eq!(state["devices"][1]["may_cancel"], false);
    assert_eq!(state["devices"][1]["reporting"]["poll_ms"], 20);
    let light = &state["devices"][2];
    assert_eq!(light["reporting"]["kind"], "pushed", "{light}");
    assert!(light["reporting"].get("poll_ms").is_none(), "{light}");
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
    assert_eq!(state["local_user"], true);
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
    let (driver, s) = browser::open(&bins, &tmp.path().join("profile")).await;
    s.viewport(1280, 800).await;
    // The page's clock shows hour 15 or so: a 12-hour clock could not pass for a 24-hour one.
    let (zone, hour) = reading::afternoon_zone();
    s.time_zone(&zone).await;
    sign_in_through_the_form(&s, &base).await;
    // A polled device shows its poll period; one that pushes its values, its allowed silence.
    reading::reports(&s, "slide", "polled", "read every 20 ms").await;
    let light = "offline after 1.5 s without a report, or when hall/light/status says";
    reading::reports(&s, "hall_light", "pushed", light).await;
    let when = (zone.as_str(), hour);

    // A switch that completes: its chart draws the reading that decided it before the verdict.
    let id = submit(&base, "lamp", "switch", json!({"on": true})).await;
    let done = engine
        .status(&id, std::time::Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(done.status, Status::Completed, "{done:?}");
    commands::deciding_reading_charted_before_the_verdict(&s, &id, &done.evidence).await;
    let switched = [
        "accepted",
        "written to the device",
        "device acknowledged",
        "reading: contact yes",
        "completed: read contact yes",
    ];
    reading::command_reads_for_people(&s, &id, when, &switched).await;

    // The lamp loses power: the page shows it offline without a reload.
    sims["lamp"].inject(closedloop_sim::FaultSpec::now(
        closedloop_sim::Fault::PowerOff,
    ));
    let offline = "const li = document.querySelector(\".device[data-device='lamp']\"); \
                   return !!li && li.dataset.liveness === 'offline' && li.querySelector('.live').textContent === 'offline'";
    s.wait_until("the lamp offline", offline, json!([])).await;

    // A move started by an agent over MCP appears, and its timeline is charted.
    let id = submit(&base, "slide", "move_to", json!({"target_mm": 300.0})).await;
    commands::charted_while_running(&s, &id).await;
    browser::screenshot(&s, "running.png", 1000).await;

    commands::cancelled_from_the_page(&s, &id).await;
    let moved = [
        "written to the device",
        "device acknowledged",
        "more readings",
        "moving yes, position ",
        "cancel written to the device",
        "cancelled: Cancelled on request",
    ];
    reading::command_reads_for_people(&s, &id, when, &moved).await;
    for (part, png) in [
        ("timeline", "cancelled-timeline.png"),
        ("chart", "cancelled-chart.png"),
    ] {
        let show = "document.getElementById(arguments[0]).scrollIntoView({block: 'end'})";
        s.run(show, json!([part])).await;
        browser::screenshot(&s, png, 1000).await;
    }

    // Ground truth: the engine says cancelled, and the simulated slide really stopped short.
    let result = engine.peek(&id).await.unwrap();
    assert_eq!(result.status, Status::Cancelled, "{result:?}");
    let truth = sims["slide"].peek();
    assert_eq!(truth.moving, Some(false), "{truth:?}");
    assert!(truth.position_mm.is_some_and(|p| p < 300.0), "{truth:?}");

    commands::filtered(&s, &id).await;

    at_phone_width_then_as_the_local_user(&s).await;
    s.end().await;
    drop(driver);
}

/// The page at phone width fits without sideways scrolling; then, from a server without tokens,
/// the header names the local user rather than a user called "http".
async fn at_phone_width_then_as_the_local_user(s: &browser::Session) {
    let wide = browser::screenshot(s, "cancelled-1280.png", 1000).await;
    s.viewport(390, 844).await;
    let fits = "const d = document.documentElement; \
                return window.innerWidth < 500 && d.scrollWidth <= d.clientWidth";
    s.wait_until("no sideways scrolling at phone width", fits, json!([]))
        .await;
    let narrow = browser::screenshot(s, "phone.png", 300).await;
    eprintln!("screenshots: {} {}", wide.display(), narrow.display());

    let (local, _engine, _sims) = serve(false).await;
    s.goto(&format!("{local}/")).await;
    reading::who(s, "local user (no sign-in on this address)").await;
    browser::screenshot(s, "local-user.png", 300).await;
}

/// Signs in at `/` through the form, as a person would, and waits for the live page.
async fn sign_in_through_the_form(s: &browser::Session, base: &str) {
    s.goto(&format!("{base}/")).await;
    let token = s.wait_for("#token").await;
    // Said to someone on the floor, who has an access code, not the plant file.
    let help = "return document.getElementById('signin-help').textContent";
    let help = s.run(help, json!([])).await;
    let help = help.as_str().unwrap();
    assert!(
        help.contains("access code your administrator gave you"),
        "{help}"
    );
    assert!(
        !help.contains("server.token") && !help.contains("scope"),
        "{help}"
    );
    s.type_into(&token, OPERATOR).await;
    s.click_css("form[action='/signin'] button[type=submit]")
        .await;
    s.wait_for(".device[data-device='slide'] tr[data-signal='position_mm']")
        .await;
    let cookie = s.run("return document.cookie", json!([])).await;
    let why = "the sign-in cookie is HttpOnly: scripts cannot read it";
    assert_eq!(cookie, json!(""), "{why}");
    reading::who(s, "signed in as operator").await;
    let live = "return document.getElementById('link').dataset.state === 'live'";
    s.wait_until("the live feed connected", live, json!([]))
        .await;
}
