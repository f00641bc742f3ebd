//! The fixture server for the MCP conformance suite (`scripts/conformance`).
//!
//! It serves, over Streamable HTTP through closedloop's own HTTP stack (Host/Origin guard,
//! in-flight limit, bearer-token auth), what the suite's server scenarios call by name:
//!
//! - the suite's own tools, resources and prompts (`test_simple_text`, `test://static-text`,
//!   `test_simple_prompt`, the SEP-2322 `test_input_required_result_*` tools, the sync-only
//!   `greet`, …), each behaving as the scenario's description in the suite asks (`tools.rs`,
//!   `interactive.rs`, `mrtr.rs`, `catalog.rs`): what is under test there is rmcp and the HTTP
//!   stack around them;
//! - the Tasks extension's task tools (`slow_compute`, `failing_job`, `confirm_delete`), which
//!   are *closedloop itself*: a [`closedloop_mcp::Server`] over an engine, a SQLite journal and
//!   simulated devices, whose actions are named as the suite names its tools (`tasks.rs`,
//!   `plant.toml`). `tools/call` of those, `tasks/get`, `tasks/update` and `tasks/cancel` go to it
//!   unchanged, so the Tasks scenarios exercise closedloop's own Tasks implementation.
//!
//! Usage: `conformance_fixture [ADDR [DIR]]`: ADDR defaults to `127.0.0.1:0`; DIR (created if
//! missing) holds the journal (default: a fresh temporary directory, left behind when the process
//! is killed, so `scripts/conformance` passes one inside its own work directory). It prints
//! `conformance fixture listening on http://ADDR/mcp` to stderr once it accepts connections and
//! runs until killed.

// The suite still exercises sampling and logging, which SEP-2577 deprecates.
#![allow(deprecated)]

mod buggy;
mod catalog;
mod handler;
mod interactive;
mod mrtr;
mod tasks;
mod tools;

use closedloop_mcp::http::{Endpoint, HttpOptions, PATH};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio::sync::broadcast;

/// A change the diagnostic trigger tools announce to every open `subscriptions/listen` stream and
/// 2025 session.
#[derive(Debug, Clone, Copy)]
enum Change {
    Tools,
    Prompts,
}

/// The fixture: the suite's tools around closedloop's server for the task tools. One value per
/// session or stateless request (cloned by the HTTP layer's factory); clones share everything.
#[derive(Clone)]
struct Fixture {
    /// Announced by the trigger tools to `listen` streams.
    changes: broadcast::Sender<Change>,
    /// Key for the integrity tag of `requestState` (fresh per process).
    state_key: Arc<[u8; 32]>,
    /// closedloop's MCP server over the conformance plant: the task tools and `tasks/*`.
    closedloop: closedloop_mcp::Server,
}

impl Fixture {
    fn new(closedloop: closedloop_mcp::Server) -> Fixture {
        let (changes, _) = broadcast::channel(16);
        let mut key = [0u8; 32];
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        key.copy_from_slice(&Sha256::digest(seed.as_bytes()));
        Fixture {
            changes,
            state_key: Arc::new(key),
            closedloop,
        }
    }
}

/// The fixture behind closedloop's own HTTP stack: Host/Origin guard, in-flight limit and
/// bearer-token auth (no tokens declared, so loopback requests are the local user).
fn app(fixture: Fixture, opts: &HttpOptions) -> axum::Router {
    closedloop_mcp::http::router_for(
        move || Ok(fixture.clone()),
        Vec::new(),
        opts.clone(),
        tokio_util::sync::CancellationToken::new(),
    )
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".into());
    // Kept until the end of `main`: dropping it would delete the journal under the engine.
    let (dir, _temporary) = match args.next() {
        Some(d) => (std::path::PathBuf::from(d), None),
        None => {
            let t = tempfile::tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    std::fs::create_dir_all(&dir)?;
    let closedloop = tasks::start(&dir).await?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let local = listener.local_addr()?;
    let app = app(Fixture::new(closedloop), &HttpOptions::default());
    eprintln!("conformance fixture listening on http://{local}{PATH}");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<Endpoint>(),
    )
    .await
}
