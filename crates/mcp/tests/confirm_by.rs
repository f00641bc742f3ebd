//! `[server] confirm_by`: over HTTP, an agent's token that may move the slide cannot confirm its
//! own `confirm = true` move — not with `confirm_command`, not by calling the tool again with the
//! token — and only the person's token named in `confirm_by` can. Checked against the
//! simulator's physical state (the slide's target register) and the journal (the command stays
//! the agent's; its `accepted` event names who confirmed). The client is rmcp's Streamable HTTP
//! client, as any MCP host would use it.

mod common;

use closedloop_journal::Journal;
use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use serde_json::json;
use std::sync::Arc;

const AGENT: &str = "agent-secret-3c1d";
const OPERATOR: &str = "operator-secret-b8e4";

/// The agent may move the slide; the operator may only read, and confirms.
fn plant(journal: &str) -> String {
    format!(
        r#"
[server]
name = "confirm-by"
journal = "{journal}"
confirm_by = ["operator"]
[[server.token]]
name = "agent"
sha256 = "{}"
scopes = ["read", "actuate:slide"]
[[server.token]]
name = "operator"
sha256 = "{}"
scopes = ["read"]
{}"#,
        common::sha256_hex(AGENT),
        common::sha256_hex(OPERATOR),
        common::plants::replace_line(
            &common::plants::slide_at(200.0),
            r#"description = "Move the slide.""#,
            "description = \"Move the slide.\"\nconfirm = true",
        )
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_confirm_by_only_the_named_token_confirms_and_the_agent_never_confirms_itself() {
    let dir = tempfile::tempdir().unwrap();
    let journal = format!("sqlite://{}", dir.path().join("journal.db").display());
    let (engine, sims) = common::engine(&plant(&journal), dir.path()).await;
    assert!(
        engine
            .plant()
            .device("slide")
            .unwrap()
            .action("move_to")
            .unwrap()
            .confirm,
        "the test plant asks for confirmation"
    );
    let url = serve_http(&engine).await;
    let agent = common::http_client(&url, AGENT).await;
    let operator = common::http_client(&url, OPERATOR).await;

    let asked = common::call(&agent, "slide_move_to", json!({"target_mm": 120.0})).await;
    let v = common::sc(&asked).clone();
    assert_eq!(v["status"], "needs_confirmation", "{v}");
    assert!(v["hint"].as_str().unwrap().contains("operator"), "{v}");
    let token = v["confirmation_token"].as_str().unwrap().to_string();

    the_agent_cannot_confirm_itself(&agent, &token, &sims).await;
    let id = the_operator_confirms_the_agent_s_move(&operator, &token, &sims).await;

    engine.shutdown().await;
    let journal = Journal::open(&journal).await.unwrap();
    let row = journal.get(&id).await.unwrap().expect("journaled");
    assert_eq!(row.caller.as_deref(), Some("agent"));
    let events = journal.events(&id).await.unwrap();
    let accepted = events.iter().find(|e| e.event == "accepted").unwrap();
    assert_eq!(accepted.data, json!({"confirmed_by": "operator"}));
}

/// Serves `engine` over Streamable HTTP on a free port: its MCP URL.
async fn serve_http(engine: &Arc<closedloop_engine::Engine>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
    let server = Server::new(Arc::clone(engine), "http");
    tokio::spawn(http::serve(
        listener,
        server,
        HttpOptions::default(),
        std::future::pending(),
    ));
    url
}

/// The simulated devices by id.
type Sims = std::collections::BTreeMap<String, closedloop_sim::SimDevice>;

/// The agent confirming itself, both ways: refused, nothing moves.
async fn the_agent_cannot_confirm_itself(agent: &common::Client, token: &str, sims: &Sims) {
    let own = common::call(
        agent,
        "confirm_command",
        json!({"confirmation_token": token}),
    )
    .await;
    assert_eq!(common::sc(&own)["status"], "rejected");
    assert_eq!(common::sc(&own)["error_code"], "INVALID_PARAMS");
    assert!(
        common::sc(&own)["detail"]
            .as_str()
            .unwrap()
            .contains("confirm_by")
    );
    let again = json!({"target_mm": 120.0, "confirmation_token": token});
    let own = common::call(agent, "slide_move_to", again).await;
    assert_eq!(
        common::sc(&own)["error_code"],
        "INVALID_PARAMS",
        "{:?}",
        own
    );
    assert_eq!(
        sims["slide"].peek().target_mm,
        Some(0.0),
        "nothing was written"
    );
}

/// The person's token confirms: the move runs as the agent's command and completes, and the
/// token is used up. The command's id.
async fn the_operator_confirms_the_agent_s_move(
    operator: &common::Client,
    token: &str,
    sims: &Sims,
) -> String {
    let args = json!({"confirmation_token": token, "wait_s": 5});
    let done = common::call(operator, "confirm_command", args).await;
    let v = common::sc(&done).clone();
    assert_eq!(v["status"], "completed", "{v}");
    assert!((sims["slide"].peek().position_mm.unwrap() - 120.0).abs() < 0.5);
    let id = v["command_id"].as_str().unwrap().to_string();
    let used = common::call(
        operator,
        "confirm_command",
        json!({"confirmation_token": token}),
    )
    .await;
    assert!(
        common::sc(&used)["detail"]
            .as_str()
            .unwrap()
            .contains("already used")
    );
    id
}

const BOSS: &str = "boss-secret-41f7";

/// The red team's plant: `confirm_by = ["operator", "boss"]`, and boss may also act on anything.
fn two_confirmers(journal: &str) -> String {
    let one = plant(journal).replace(
        r#"confirm_by = ["operator"]"#,
        r#"confirm_by = ["operator", "boss"]"#,
    );
    let boss = format!(
        "[[server.token]]\nname = \"boss\"\nsha256 = \"{}\"\nscopes = [\"read\", \"actuate:*\"]\n[[server.token]]\nname = \"operator\"",
        common::sha256_hex(BOSS)
    );
    one.replacen("[[server.token]]\nname = \"operator\"", &boss, 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_by_token_that_asked_cannot_confirm_its_own_request_another_must() {
    let dir = tempfile::tempdir().unwrap();
    let journal = format!("sqlite://{}", dir.path().join("journal.db").display());
    let (engine, sims) = common::engine(&two_confirmers(&journal), dir.path()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
    let server = Server::new(Arc::clone(&engine), "http");
    tokio::spawn(http::serve(
        listener,
        server,
        HttpOptions::default(),
        std::future::pending(),
    ));
    let boss = common::http_client(&url, BOSS).await;
    let operator = common::http_client(&url, OPERATOR).await;

    let asked = common::call(&boss, "slide_move_to", json!({"target_mm": 80.0})).await;
    let v = common::sc(&asked).clone();
    assert_eq!(v["status"], "needs_confirmation", "{v}");
    let token = v["confirmation_token"].as_str().unwrap().to_string();
    // Boss is a confirmer, but this is boss's own request: refused, nothing moves.
    let own = common::call(
        &boss,
        "confirm_command",
        json!({"confirmation_token": token}),
    )
    .await;
    let v = common::sc(&own).clone();
    assert_eq!(
        (v["status"].as_str(), v["error_code"].as_str()),
        (Some("rejected"), Some("INVALID_PARAMS")),
        "{v}"
    );
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .starts_with("boss asked for this action and cannot confirm its own request"),
        "{v}"
    );
    assert_eq!(
        sims["slide"].peek().target_mm,
        Some(0.0),
        "nothing was written"
    );
    // The token is still good for the other confirmer.
    let args = json!({"confirmation_token": token, "wait_s": 5});
    let done = common::call(&operator, "confirm_command", args).await;
    let v = common::sc(&done).clone();
    assert_eq!(v["status"], "completed", "{v}");
    assert!((sims["slide"].peek().position_mm.unwrap() - 80.0).abs() < 0.5);
    engine.shutdown().await;
}
