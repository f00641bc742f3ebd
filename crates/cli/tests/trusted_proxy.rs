//! Behind a TLS proxy (issue 53, item 2): `closedloop serve --http --trusted-proxy ADDR` counts
//! the client a trusted proxy names in `X-Forwarded-For`, so a guesser behind the proxy is held
//! and the operator behind the same proxy is not; a peer that is not a trusted proxy cannot
//! escape the hold by rotating the header. Through the binary, over loopback addresses (the
//! "proxy" is 127.0.0.2).

mod common;

#[path = "floods/client.rs"]
mod client;

#[path = "floods/attack.rs"]
mod attack;

use attack::{OPERATOR, VIEWER};
use client::{Gateway, mcp_with};

const PROXY: [u8; 4] = [127, 0, 0, 2];

/// `list_devices` with `token`, from `from`, the proxy saying it forwarded for `xff`: the status.
async fn status(gw: &Gateway, from: [u8; 4], token: &str, xff: &str) -> u16 {
    let more = [("X-Forwarded-For", xff)];
    mcp_with(gw, from, token, "list_devices", "{}", &more)
        .await
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_guesser_is_held_and_the_operator_is_not() {
    let gw = Gateway::start_with(OPERATOR, VIEWER, &["--trusted-proxy", "127.0.0.2/32"]);
    let guesser = "203.0.113.66";
    let mut statuses = Vec::new();
    for i in 0..6 {
        statuses.push(status(&gw, PROXY, &format!("guess-{i}"), guesser).await);
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429]);
    // A forged leftmost entry does not help: the proxy appended the guesser's own address.
    let forged = format!("6.6.6.6, {guesser}");
    assert_eq!(status(&gw, PROXY, "guess-forged", &forged).await, 429);
    // The operator behind the same proxy, its token never seen before: served at once.
    assert_eq!(status(&gw, PROXY, OPERATOR, "203.0.113.10").await, 200);
    // A garbled header counts as the proxy itself, which has guessed nothing.
    assert_eq!(status(&gw, PROXY, VIEWER, "unknown").await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_is_no_trusted_proxy_cannot_rotate_its_way_past_the_hold() {
    let gw = Gateway::start_with(OPERATOR, VIEWER, &["--trusted-proxy", "127.0.0.2"]);
    let direct = [127, 0, 0, 5];
    let mut statuses = Vec::new();
    for i in 0..6 {
        let xff = format!("198.51.100.{i}");
        statuses.push(status(&gw, direct, &format!("guess-{i}"), &xff).await);
    }
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429]);
    // Without --trusted-proxy the proxy is one address: its guesser holds its operator too.
    let gw = Gateway::start(OPERATOR, VIEWER);
    for i in 0..5 {
        assert_eq!(
            status(&gw, PROXY, &format!("g{i}"), "203.0.113.66").await,
            401
        );
    }
    assert_eq!(status(&gw, PROXY, OPERATOR, "203.0.113.10").await, 429);
}
