//! One WebDriver session: the commands the operator page's test sends to the browser.

use super::{ELEMENT, POLL, POLLS, base64_decode, send};
use serde_json::{Value, json};
use std::path::PathBuf;

/// A browser session; ended when dropped only by [`Session::end`] (async).
pub struct Session {
    url: String,
    http: reqwest::Client,
    failure_png: PathBuf,
}

impl Session {
    pub(super) fn new(url: String, http: reqwest::Client, failure_png: PathBuf) -> Session {
        Session {
            url,
            http,
            failure_png,
        }
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        send(&self.http, method, &format!("{}{path}", self.url), body).await
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url})).await;
    }

    /// The element `css` selects, if any.
    pub async fn find(&self, css: &str) -> Option<String> {
        let found = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await
            .ok()?;
        found[ELEMENT].as_str().map(str::to_string)
    }

    /// Waits (bounded) for `css` to select an element and returns it.
    pub async fn wait_for(&self, css: &str) -> String {
        for _ in 0..POLLS {
            if let Some(e) = self.find(css).await {
                return e;
            }
            tokio::time::sleep(POLL).await;
        }
        let seen = self.diagnose().await;
        panic!("the page never showed {css:?} ({} s); {seen}", POLLS / 10);
    }

    /// What the page shows now, for a failure message, with a screenshot written beside.
    async fn diagnose(&self) -> String {
        if let Ok(v) = self.call(reqwest::Method::GET, "/screenshot", None).await
            && let Some(b64) = v.as_str()
        {
            let _ = std::fs::write(&self.failure_png, base64_decode(b64));
        }
        let script =
            "return location.href + '\\n' + (document.body ? document.body.innerText : '')";
        let body = json!({"script": script, "args": []});
        let text = self
            .call(reqwest::Method::POST, "/execute/sync", Some(body))
            .await;
        format!(
            "the page ({}) reads:\n{}",
            self.failure_png.display(),
            text.map(|v| v
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(3000)
                .collect::<String>())
                .unwrap_or_else(|e| e)
        )
    }

    /// Clicks what `css` selects, waiting (bounded) for it; an element the page re-rendered
    /// between finding and clicking (stale) is found again.
    pub async fn click_css(&self, css: &str) {
        for _ in 0..POLLS {
            let element = self.wait_for(css).await;
            let path = format!("/element/{element}/click");
            match self
                .call(reqwest::Method::POST, &path, Some(json!({})))
                .await
            {
                Ok(_) => return,
                Err(e) if e.contains("stale element") => continue,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("{css:?} went stale {POLLS} times in a row");
    }

    pub async fn click(&self, element: &str) {
        self.post(&format!("/element/{element}/click"), json!({}))
            .await;
    }

    pub async fn type_into(&self, element: &str, text: &str) {
        self.post(&format!("/element/{element}/value"), json!({"text": text}))
            .await;
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns what it returns.
    pub async fn run(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args}))
            .await
    }

    /// Waits (bounded) until `script` returns something truthy, and returns it; `what` says
    /// what was waited for when it never comes.
    pub async fn wait_until(&self, what: &str, script: &str, args: Value) -> Value {
        let mut last = Value::Null;
        for _ in 0..POLLS {
            last = self.run(script, args.clone()).await;
            let truthy = !matches!(&last, Value::Null | Value::Bool(false))
                && last != json!("")
                && last != json!(0);
            if truthy {
                return last;
            }
            tokio::time::sleep(POLL).await;
        }
        let seen = self.diagnose().await;
        panic!(
            "the page never showed {what} ({} s); last answer: {last}; {seen}",
            POLLS / 10
        );
    }

    /// Presses and releases one key (a WebDriver key code: Tab is `\u{E004}`, Enter `\u{E007}`)
    /// on whatever has the focus.
    pub async fn press(&self, key: char) {
        let k = key.to_string();
        let keys = json!([{"type": "keyDown", "value": k}, {"type": "keyUp", "value": k}]);
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": keys}]});
        self.post("/actions", actions).await;
    }

    /// The text of the open `alert`/`confirm`, waiting (bounded) for it to open.
    pub async fn dialog_text(&self) -> String {
        for _ in 0..POLLS {
            if let Ok(v) = self.call(reqwest::Method::GET, "/alert/text", None).await {
                return v.as_str().unwrap_or_default().to_string();
            }
            tokio::time::sleep(POLL).await;
        }
        panic!("no confirmation dialog opened ({} s)", POLLS / 10);
    }

    pub async fn accept_dialog(&self) {
        self.post("/alert/accept", json!({})).await;
    }

    /// Sizes the window so that the page itself (the viewport) is `width`×`height`: a headless
    /// window's size includes the browser's own frame (and its reported outer width is not
    /// always the window's), so the viewport is measured and the difference added.
    pub async fn viewport(&self, width: u32, height: u32) {
        self.resize(width, height).await;
        let inner = self
            .run("return [window.innerWidth, window.innerHeight]", json!([]))
            .await;
        let short = |got: &Value, want: u32| want.saturating_sub(got.as_u64().unwrap_or(0) as u32);
        let (dw, dh) = (short(&inner[0], width), short(&inner[1], height));
        if dw > 0 || dh > 0 {
            self.resize(width + dw, height + dh).await;
        }
    }

    /// Shows the page in the time zone `zone` (an IANA name, `Etc/GMT-3`), whatever the
    /// machine's: a Chrome DevTools command through chromedriver.
    pub async fn time_zone(&self, zone: &str) {
        let cmd = json!({"cmd": "Emulation.setTimezoneOverride", "params": {"timezoneId": zone}});
        self.post("/goog/cdp/execute", cmd).await;
    }

    pub async fn resize(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let v = self
            .call(reqwest::Method::GET, "/screenshot", None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        base64_decode(v.as_str().expect("base64 screenshot"))
    }

    pub async fn end(self) {
        let _ = self.call(reqwest::Method::DELETE, "", None).await;
    }
}
