//! The async-opcua stack of a [`SimServer`](super::SimServer): the sockets it is reached
//! through, how it is configured (names, endpoints, security, limits) and when it is ready.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use closedloop_sim::SimDevice;
use opcua::crypto::SecurityPolicy;
use opcua::server::node_manager::memory::{InMemoryNodeManager, InMemoryNodeManagerBuilder};
use opcua::server::{ANONYMOUS_USER_TOKEN_ID, ServerBuilder, ServerHandle};
use opcua::types::MessageSecurityMode;
use tokio::net::TcpListener;

use super::SimError;
use super::nodes::SimNodes;

/// The two sockets of a server. Clients connect to the public one; the gate forwards what it
/// lets through to the internal one, which the OPC UA stack serves, so the gate can go dark or
/// freeze without the stack knowing.
pub(super) struct Doors {
    /// What clients connect to.
    pub(super) public: TcpListener,
    /// The public address actually bound (the real port when asked for 0).
    pub(super) addr: SocketAddr,
    /// What the OPC UA stack serves, on loopback.
    pub(super) internal: TcpListener,
    /// The internal address, where the gate forwards to.
    pub(super) upstream: SocketAddr,
}

impl Doors {
    /// Binds `listen` (public) and a free loopback port (internal).
    pub(super) async fn bind(listen: SocketAddr) -> Result<Doors, SimError> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| SimError::Bind { addr, source })
        };
        let public = bind(listen).await?;
        let addr = public.local_addr().map_err(|source| SimError::Bind {
            addr: listen,
            source,
        })?;
        let internal = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let upstream = internal.local_addr().map_err(|source| SimError::Bind {
            addr: listen,
            source,
        })?;
        Ok(Doors {
            public,
            addr,
            internal,
            upstream,
        })
    }
}

/// The host of the endpoint URL for `addr`: a client cannot connect to an unspecified address,
/// so `0.0.0.0` and `::` are announced as `127.0.0.1`; IPv6 goes in brackets.
pub(super) fn url_host(addr: SocketAddr) -> String {
    match addr.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    }
}

/// The OPC UA stack's configuration: its names, the public port and URL it announces, the
/// security-None endpoint, and the node manager that builds `devices`' nodes.
pub(super) fn stack_builder(
    host: &str,
    port: u16,
    url: &str,
    devices: Vec<(String, SimDevice)>,
) -> ServerBuilder {
    ServerBuilder::new()
        .application_name("closedloop sim")
        .application_uri("urn:closedloop:sim:server")
        .product_uri("urn:closedloop")
        .host(host.trim_matches(['[', ']']))
        .port(port)
        .discovery_urls(vec![url.to_string()])
        .subscription_poll_interval_ms(10)
        .add_endpoint(
            "none",
            (
                "/",
                SecurityPolicy::None,
                MessageSecurityMode::None,
                &[ANONYMOUS_USER_TOKEN_ID] as &[&str],
            ),
        )
        .with_node_manager(InMemoryNodeManagerBuilder::new(
            move |context: opcua::server::node_manager::ServerContext,
                  space: &mut opcua::server::address_space::AddressSpace| {
                SimNodes::build(devices, &context, space)
            },
        ))
}

/// With `pki_dir`, adds the Basic256Sha256 endpoints (Sign, SignAndEncrypt), a certificate
/// generated there on first use and trust in any client; returns the builder and the server
/// certificate's path. Without, security stays None and no key pair is made.
pub(super) fn with_security(
    mut builder: ServerBuilder,
    pki_dir: Option<&PathBuf>,
) -> (ServerBuilder, Option<PathBuf>) {
    let Some(pki) = pki_dir else {
        let builder = builder
            .pki_dir(std::env::temp_dir().join("closedloop-opcua-sim-pki"))
            .create_sample_keypair(false);
        return (builder, None);
    };
    for (id, mode) in [
        ("basic256sha256_sign", MessageSecurityMode::Sign),
        (
            "basic256sha256_sign_encrypt",
            MessageSecurityMode::SignAndEncrypt,
        ),
    ] {
        builder = builder.add_endpoint(
            id,
            (
                "/",
                SecurityPolicy::Basic256Sha256,
                mode,
                &[ANONYMOUS_USER_TOKEN_ID] as &[&str],
            ),
        );
    }
    let builder = builder
        .pki_dir(pki.clone())
        .create_sample_keypair(true)
        .trust_client_certs(true);
    (builder, Some(pki.join("own").join("cert.der")))
}

/// Lets clients sample and publish as fast as every 10 ms (the devices are sampled every
/// [`SAMPLE_PERIOD`](super::SAMPLE_PERIOD)); without `subscriptions`, refuses every subscription.
pub(super) fn set_limits(builder: &mut ServerBuilder, subscriptions: bool) {
    let limits = builder.limits_mut();
    limits.subscriptions.min_sampling_interval_ms = 10.0;
    limits.subscriptions.min_publishing_interval_ms = 10.0;
    if !subscriptions {
        limits.subscriptions.max_subscriptions_per_session = 0;
    }
}

/// Waits (at most 10 s) until the stack serves, then makes it announce the public port; returns
/// the node manager of the devices.
pub(super) async fn serving(
    handle: &ServerHandle,
    upstream: SocketAddr,
    public: SocketAddr,
) -> Result<Arc<InMemoryNodeManager<SimNodes>>, SimError> {
    // The stack advertises the port of the socket it was given; once it has stored it,
    // put back the public port, so endpoint descriptions name the door clients came through.
    let info = handle.info().clone();
    let ready = async {
        while info.port.load(Ordering::Relaxed) != upstream.port() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(10), ready)
        .await
        .is_err()
    {
        return Err(SimError::Server("did not start within 10 s".into()));
    }
    info.port.store(public.port(), Ordering::Relaxed);
    handle
        .node_managers()
        .get_of_type::<InMemoryNodeManager<SimNodes>>()
        .ok_or_else(|| SimError::Server("the device node manager is missing".into()))
}
