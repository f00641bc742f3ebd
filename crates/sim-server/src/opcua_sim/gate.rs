//! The sim server's front door: a TCP relay between clients and the OPC UA stack that can go
//! dark or freeze, which is how a device's power loss and a zombie firmware look on the wire.
//!
//! OPC UA stacks answer everything they receive; a device without power answers nothing and
//! closes nothing, and a frozen firmware keeps its sockets open and says nothing. Those are
//! properties of the socket, so they are made here, in front of async-opcua's server, rather
//! than inside it.

use std::net::SocketAddr;

use closedloop_sim::{FaultKind, SimDevice};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Most client connections relayed at once; beyond it new ones are closed at once.
const MAX_CONNECTIONS: usize = 64;

/// What the front door does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Relays both ways.
    Open,
    /// Power is off: every connection is dropped, new ones are closed as soon as they arrive.
    Dark,
    /// Zombie: connections stay open, nothing is relayed either way. When it ends, the frozen
    /// connections are dropped (the firmware restarted) and clients reconnect.
    Frozen,
}

/// The gate the devices' faults call for. The server itself goes dark or freezes only when
/// every device it hosts is silent — a server hosting a live device keeps answering, and a
/// silent device's own nodes answer `Bad_Timeout` like a gateway's would.
pub(crate) fn gate_for(devices: &[(String, SimDevice)]) -> Gate {
    if devices.is_empty() {
        return Gate::Open;
    }
    let mut dark = false;
    for (_, device) in devices {
        if !device.peek().silent {
            return Gate::Open;
        }
        dark |= device
            .faults()
            .iter()
            .any(|f| matches!(f.fault.kind(), FaultKind::PowerOff | FaultKind::Reboot));
    }
    if dark { Gate::Dark } else { Gate::Frozen }
}

/// Accepts clients on `public` and relays each to the OPC UA stack at `upstream`, under `gate`.
/// Runs until aborted; aborting it drops every relayed connection.
pub(crate) async fn serve(public: TcpListener, upstream: SocketAddr, gate: watch::Receiver<Gate>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = public.accept() => {
                let Ok((socket, _)) = accepted else { continue };
                let state = *gate.borrow();
                if connections.len() >= MAX_CONNECTIONS {
                    tracing::warn!("sim OPC UA server: connection limit reached; closing a new one");
                    continue;
                }
                match state {
                    Gate::Dark => drop(socket),
                    Gate::Frozen => {
                        connections.spawn(hold(socket, gate.clone()));
                    }
                    Gate::Open => {
                        connections.spawn(relay(socket, upstream, gate.clone()));
                    }
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A connection that arrived while frozen: accepted, never answered, closed when the zombie ends.
async fn hold(socket: TcpStream, mut gate: watch::Receiver<Gate>) {
    let _ = gate.wait_for(|g| *g != Gate::Frozen).await;
    drop(socket);
}

/// Relays one client until either side closes, the power goes off, or a zombie period ends.
async fn relay(client: TcpStream, upstream: SocketAddr, mut gate: watch::Receiver<Gate>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let forward = async {
        tokio::select! {
            _ = tokio::io::copy(&mut client_rx, &mut server_tx) => {}
            _ = tokio::io::copy(&mut server_rx, &mut client_tx) => {}
        }
    };
    let frozen = tokio::select! {
        _ = forward => false,
        state = gate.wait_for(|g| *g != Gate::Open) => {
            state.map(|g| *g == Gate::Frozen).unwrap_or(false)
        }
    };
    if frozen {
        // Sockets stay open, nothing moves, until the zombie ends.
        let _ = gate.wait_for(|g| *g != Gate::Frozen).await;
    }
}
