//! A small W3C WebDriver client over plain HTTP (JSON), for the operator page's browser test:
//! chromedriver started on a free loopback port, headless Chromium in a throwaway profile.
//!
//! Only what the test needs: navigate, find, click, type, run a script, answer `confirm()`,
//! resize, screenshot. Every wait is bounded and says what it waited for when it gives up.

#![allow(dead_code)]

pub mod commands;
pub mod reading;
mod session;

use serde_json::{Value, json};
pub use session::Session;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The W3C key of an element reference.
pub(crate) const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long a wait for the page lasts, in polls of [`POLL`].
pub(crate) const POLLS: u32 = 300;
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The binaries a browser test needs, found on `PATH`.
pub struct Binaries {
    pub chromedriver: PathBuf,
    pub chromium: PathBuf,
}

/// chromedriver and Chromium, or why they are missing.
pub fn binaries() -> Result<Binaries, String> {
    let find = |names: &[&str]| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
            .find(|p| p.is_file())
    };
    let chromedriver = find(&["chromedriver"]).ok_or("no chromedriver on PATH")?;
    let chromium =
        find(&["chromium", "chromium-browser", "google-chrome"]).ok_or("no chromium on PATH")?;
    Ok(Binaries {
        chromedriver,
        chromium,
    })
}

/// A running chromedriver; killed when dropped.
pub struct Driver {
    child: Child,
    pub base: String,
    http: reqwest::Client,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    /// Starts chromedriver on a free port (a port taken between the probe and the start is
    /// retried on another), logging to `log`.
    pub async fn start(bin: &Path, log: &Path) -> Driver {
        let http = reqwest::Client::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free loopback port")
                .port();
            let out = std::fs::File::create(log).expect("chromedriver log");
            let child = Command::new(bin)
                .arg(format!("--port={port}"))
                .stdout(Stdio::from(out.try_clone().expect("log")))
                .stderr(Stdio::from(out))
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
            let mut d = Driver {
                child,
                base: format!("http://127.0.0.1:{port}"),
                http: http.clone(),
            };
            if d.ready().await {
                return d;
            }
        }
        let text = std::fs::read_to_string(log).unwrap_or_default();
        panic!("chromedriver never became ready on 5 ports; its log:\n{text}");
    }

    /// Whether `/status` says ready (bounded); false when the process exited first.
    async fn ready(&mut self) -> bool {
        for _ in 0..POLLS {
            if self.child.try_wait().ok().flatten().is_some() {
                return false;
            }
            let url = format!("{}/status", self.base);
            if let Ok(r) = self.http.get(&url).send().await
                && let Ok(v) = r.text().await
                && serde_json::from_str::<Value>(&v).is_ok_and(|v| v["value"]["ready"] == true)
            {
                return true;
            }
            tokio::time::sleep(POLL).await;
        }
        false
    }

    /// A headless Chromium session at 1280×800 with its profile in `profile`; when a wait gives
    /// up, a screenshot of the page goes to `failure_png`.
    pub async fn session(&self, chromium: &Path, profile: &Path, failure_png: &Path) -> Session {
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,800",
                         format!("--user-data-dir={}", profile.display())],
            },
        }}});
        let v = send(
            &self.http,
            reqwest::Method::POST,
            &format!("{}/session", self.base),
            Some(caps),
        )
        .await
        .unwrap_or_else(|e| panic!("new WebDriver session: {e}"));
        let id = v["sessionId"].as_str().expect("sessionId").to_string();
        Session::new(
            format!("{}/session/{id}", self.base),
            self.http.clone(),
            failure_png.to_path_buf(),
        )
    }
}

/// One WebDriver request; the `value` of its answer, or the WebDriver error.
pub(crate) async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let mut req = http.request(method.clone(), url);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let r = req
        .send()
        .await
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let ok = r.status().is_success();
    let text = r.text().await.map_err(|e| format!("{method} {url}: {e}"))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("{method} {url}: {e}: {text}"))?;
    if ok {
        Ok(v["value"].clone())
    } else {
        Err(format!(
            "{method} {url}: {} — {}",
            v["value"]["error"], v["value"]["message"]
        ))
    }
}

/// Where the screenshots go.
pub fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("operator-page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Takes a screenshot, writes it to `name`, and checks it is a picture of something.
pub async fn screenshot(s: &Session, name: &str, min_width: u32) -> PathBuf {
    let png = s.screenshot().await;
    let path = artifacts().join(name);
    std::fs::write(&path, &png).unwrap();
    let (w, h) = png_size(&png);
    assert!(w >= min_width && h >= 400, "{name}: {w}x{h}");
    // A blank page compresses to a few kilobytes of a handful of byte values.
    let mut seen = [false; 256];
    png.iter().for_each(|b| seen[usize::from(*b)] = true);
    let distinct = seen.iter().filter(|s| **s).count();
    assert!(
        png.len() > 20_000 && distinct > 200,
        "{name} looks blank: {} bytes, {distinct} distinct",
        png.len()
    );
    path
}

/// chromedriver and Chromium, or `None` after the skip line (a failure under `CI=true`).
pub fn binaries_or_skip() -> Option<Binaries> {
    match binaries() {
        Ok(b) => Some(b),
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => panic!(
            "CI=true and {why}: the operator page's browser test needs Debian's chromium and chromium-driver (bash scripts/system-deps installs them)"
        ),
        Err(why) => {
            eprintln!(
                "SKIP operator page browser test: {why} (apt-get install chromium chromium-driver, or bash scripts/system-deps)"
            );
            None
        }
    }
}

/// chromedriver started (its log in [`artifacts`]) and a headless Chromium session on it with its
/// profile in `profile`, whose failure screenshot goes to [`artifacts`] too.
pub async fn open(bins: &Binaries, profile: &Path) -> (Driver, Session) {
    let log = artifacts().join("chromedriver.log");
    let driver = Driver::start(&bins.chromedriver, &log).await;
    let failure = artifacts().join("failure.png");
    let session = driver.session(&bins.chromium, profile, &failure).await;
    (driver, session)
}

/// Standard base64 (with padding, no line breaks), as WebDriver sends screenshots.
pub fn base64_decode(s: &str) -> Vec<u8> {
    let digit = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {:?}", c as char),
        }
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, c)| acc | digit(*c) << (18 - 6 * i));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    out
}

/// A PNG's width and height, from its IHDR chunk.
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG"
    );
    let be = |i: usize| u32::from_be_bytes([png[i], png[i + 1], png[i + 2], png[i + 3]]);
    (be(16), be(20))
}

#[test]
fn base64_decodes_what_it_should() {
    assert_eq!(base64_decode("aGVsbG8="), b"hello");
    assert_eq!(base64_decode("aGVsbG8h"), b"hello!");
    assert_eq!(base64_decode("aGk="), b"hi");
}
