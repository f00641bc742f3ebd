//! `closedloop init --opcua`: surveys a server's address space below a node (the Objects folder
//! by default) through the OPC UA driver's own client, then maps it (`ua_map.rs`). The session
//! is configured exactly as `serve` would from the driver table the plant will carry: that table
//! is loaded and built by the plant loader and the driver builder first, so security, the
//! pinned certificate and the user are checked the same way.

use closedloop_connect::Connection;
use closedloop_opcua::{OpcuaClient, SessionState, Survey};
use std::path::Path;
use std::time::Duration;

/// The server side of `init --opcua`.
pub struct Source<'a> {
    /// `opc.tcp://host:port[/path]`.
    pub endpoint: &'a str,
    /// Where to start (a NodeId; `i=85` is the Objects folder).
    pub node: &'a str,
    /// How many levels below it.
    pub depth: u32,
    /// `none`, `sign` or `sign_and_encrypt`.
    pub security: &'a str,
    pub server_cert: Option<&'a Path>,
    pub username: Option<&'a str>,
}

/// At most this many nodes are surveyed.
pub const MAX_NODES: usize = 2000;

/// How long to wait for the session.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

impl Source<'_> {
    /// The driver table every generated device carries (and the survey's session is built from),
    /// naming the server's certificate as `cert` (relative to the plant file there, to here for
    /// the survey).
    pub fn driver(&self, cert: Option<&Path>) -> String {
        use super::names::quote;
        let mut fields = vec![
            "kind = \"opcua\"".to_string(),
            format!("endpoint = {}", quote(self.endpoint)),
            format!("security = {}", quote(self.security)),
        ];
        if let Some(cert) = cert {
            fields.push(format!(
                "server_cert = {}",
                quote(&cert.display().to_string())
            ));
        }
        if let Some(user) = self.username {
            fields.push(format!("username = {}", quote(user)));
            fields.push("password = \"${env:OPCUA_PASSWORD}\"".into());
        }
        format!("{{ {} }}", fields.join(", "))
    }
}

/// Surveys the server.
pub fn survey(src: &Source) -> Result<Survey, String> {
    let config = session_config(src)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("closedloop init: cannot start a runtime: {e}"))?;
    let survey = runtime.block_on(async {
        let client = OpcuaClient::connect(config).map_err(|e| format!("{}: {e}", src.endpoint))?;
        match connected(&client).await {
            Ok(()) => {
                let s = client.survey(src.node, src.depth, MAX_NODES).await;
                let _ = tokio::time::timeout(Duration::from_secs(2), client.close()).await;
                s.map_err(|e| format!("{}: {e}", src.endpoint))
            }
            Err(why) => Err(format!(
                "{}: no session ({why}); check the endpoint, --security and --server-cert, and --username with OPCUA_PASSWORD if the server wants a user",
                src.endpoint
            )),
        }
    });
    // The client's reconnecting tasks are not waited for.
    runtime.shutdown_background();
    survey
}

/// The session's configuration, from a one-device plant with the driver table.
fn session_config(src: &Source) -> Result<closedloop_opcua::OpcuaConfig, String> {
    let text = format!(
        "[[device]]\nid = \"server\"\ndescription = \"The server surveyed\"\ndriver = {}\n[device.signals]\nclock = {{ node = \"i=2258\" }}\n",
        src.driver(src.server_cert)
    );
    let env = |k: &str| std::env::var(k).ok();
    let options = |e: String| {
        format!(
            "{e}\n(closedloop init --opcua builds its session from --security, --server-cert, and --username with OPCUA_PASSWORD)"
        )
    };
    let plant = closedloop_plant::parse_with_env(&text, "--opcua", Path::new("."), &env)
        .map_err(|e| options(e.to_string()))?;
    let built = closedloop_connect::build_drivers(&plant).map_err(|e| options(e.to_string()))?;
    match built.map.into_values().next() {
        Some(Connection::Opcua(config)) => Ok(*config),
        _ => Err("closedloop init: no OPC UA session could be configured".into()),
    }
}

/// Waits for the session; the first failure or none within [`CONNECT_WITHIN`] is the answer.
async fn connected(client: &OpcuaClient) -> Result<(), String> {
    let mut state = client.session_state();
    let until = tokio::time::Instant::now() + CONNECT_WITHIN;
    loop {
        match &*state.borrow_and_update() {
            SessionState::Connected => return Ok(()),
            // The client's first state; anything else is the first attempt's failure.
            SessionState::Disconnected(why) if why == "not connected yet" => {}
            SessionState::Disconnected(why) => return Err(why.clone()),
        }
        if tokio::time::timeout_at(until, state.changed())
            .await
            .is_err()
        {
            return Err(format!("no session within {} s", CONNECT_WITHIN.as_secs()));
        }
    }
}
