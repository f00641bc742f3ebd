//! A running simulated bus: the pty socat makes for it, and the adapter task that stands
//! between that pty and the nodes ([`adapter`] decides what each byte means; this moves the
//! bytes and the frames).

use closedloop_can::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::node::{self, CanNode, HOST, Origin, Plan};
use super::{BUS_FANOUT, BUS_QUEUE, CanSimError, SimBus, adapter, link_path, socat};

/// Makes the pty and starts the adapter and the nodes of one bus.
pub(super) async fn spawn_bus(
    name: String,
    nodes: Vec<(CanNode, Plan)>,
) -> Result<SimBus, CanSimError> {
    let link = link_path(&name);
    let pair = socat::spawn(Some(&link))
        .await
        .map_err(|reason| CanSimError::Socat {
            bus: name.clone(),
            devices: nodes
                .iter()
                .map(|(n, _)| n.device())
                .collect::<Vec<_>>()
                .join(", "),
            reason,
        })?;
    let (out_tx, out_rx) = mpsc::channel(BUS_QUEUE);
    let (bus_tx, _) = broadcast::channel(BUS_FANOUT);
    let mut tasks = JoinSet::new();
    let mut handles = Vec::with_capacity(nodes.len());
    for (index, (node, plan)) in nodes.into_iter().enumerate() {
        handles.push(node.clone());
        tasks.spawn(node::run(
            node,
            plan,
            index,
            bus_tx.subscribe(),
            out_tx.clone(),
        ));
    }
    tasks.spawn(serve_adapter(
        name.clone(),
        pair.to_host,
        pair.from_host,
        out_rx,
        out_tx,
        bus_tx,
    ));
    tracing::info!(bus = %name, pty = %pair.pty, "simulated CAN bus up");
    Ok(SimBus {
        name,
        pty: pair.pty,
        nodes: handles,
        _tasks: tasks,
        _socat: pair.child,
    })
}

/// The adapter: the host's bytes in (answers back, frames onto the bus), the nodes' frames out
/// (onto the bus, and to the host while the channel is open). Ends when socat goes away.
///
/// `_keep` is a sender of `from_nodes` that keeps the channel open, so it never reports closed
/// while the nodes come and go.
async fn serve_adapter(
    bus: String,
    mut to_host: ChildStdin,
    mut from_host: ChildStdout,
    mut from_nodes: mpsc::Receiver<(Origin, Frame)>,
    _keep: mpsc::Sender<(Origin, Frame)>,
    on_bus: broadcast::Sender<(Origin, Frame)>,
) {
    let started = Instant::now();
    let mut adapter = adapter::Adapter::default();
    let mut buf = [0u8; 1024];
    loop {
        let out = tokio::select! {
            read = from_host.read(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    tracing::warn!(bus = %bus, "the pty went away (socat exited)");
                    return;
                }
                Ok(n) => {
                    let before = adapter.channel();
                    let fed = adapter.feed(&buf[..n]);
                    if adapter.channel() != before {
                        tracing::info!(bus = %bus, "the host set the channel {:?}", adapter.channel());
                    }
                    for frame in fed.frames {
                        // No node listening is no error.
                        let _ = on_bus.send((HOST, frame));
                    }
                    fed.reply
                }
            },
            Some((from, frame)) = from_nodes.recv() => {
                let now_ms = started.elapsed().as_millis() as u64;
                let line = adapter.report(&frame, now_ms).unwrap_or_default();
                let _ = on_bus.send((from, frame));
                line
            }
        };
        if out.is_empty() {
            continue;
        }
        if let Err(e) = async {
            to_host.write_all(&out).await?;
            to_host.flush().await
        }
        .await
        {
            tracing::warn!(bus = %bus, "writing to the pty: {e}");
            return;
        }
    }
}
