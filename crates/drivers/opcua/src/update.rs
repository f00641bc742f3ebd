//! What the client hands out: [`Update`]s (values, numbered) and [`Ack`]s (acknowledgements,
//! carrying the fence that tells fresh values from old ones).

use closedloop_contract::Value;
use opcua::types::{DataValue, StatusCode};
use tokio::time::Instant;

use crate::convert;
use crate::error::status_name;

/// One value read from the server, by a read, a poll or a subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The node as the caller named it (`ns=2;s=Pump1.Speed`).
    pub node: String,
    /// The value as the engine sees it: numbers of any numeric type as f64, Boolean as bool;
    /// `None` for any other type (see `value_type`) or when the server sent no value.
    pub value: Option<Value>,
    /// The type of the variant received (`Double`, `Int16`, `String`, `Empty`).
    pub value_type: String,
    /// The value's status name: `Good`, `Uncertain_…`, `Bad_…`.
    pub status: String,
    /// Whether the status is Good; only Good values count as evidence (docs/plant-file.md).
    pub good: bool,
    /// The source timestamp (device clock), milliseconds since the Unix epoch, if sent.
    pub source_ms: Option<i64>,
    /// The server timestamp, milliseconds since the Unix epoch, if sent.
    pub server_ms: Option<i64>,
    /// Where the value stands in this connection's order; compare with [`Ack::seq`]. Data changes
    /// are numbered when they are received, reads and polls when their request is issued, so a
    /// read already in flight when a write was acknowledged never counts as fresh.
    pub seq: u64,
    /// Whether a Read request (a read, a poll, a resync) produced it, rather than a
    /// subscription. A read issued after an acknowledgement returns the node's value at that
    /// time, whatever its timestamps say: a value the write or call itself set keeps the
    /// timestamp it was set with, before the acknowledgement, and a subscription never sends it
    /// again (it reports changes only). A subscription sample carries no such promise: the server
    /// may have taken it before the acknowledgement and queued it.
    pub from_read: bool,
    /// When the client received it.
    pub received_at: Instant,
    /// When the Read request that produced it was issued (`None` for a subscription sample):
    /// the earliest the server can have read the value, so the time it counts as taken.
    pub asked_at: Option<Instant>,
}

impl Update {
    /// Whether the server sent no value at all (a null variant or no value field): the node
    /// holds nothing yet, which is no value — never a reading, and no sign that the plant names
    /// the wrong node or type either (a server does this while a device it gateways is starting).
    pub fn holds_nothing(&self) -> bool {
        self.value.is_none() && self.value_type == "Empty"
    }

    /// An update built from a data value received for `node`, by a Read request (`from_read`) or
    /// in a subscription's notification.
    pub(crate) fn from_data_value(
        node: String,
        dv: &DataValue,
        seq: u64,
        from_read: bool,
    ) -> Update {
        let status = dv.status();
        let (value, value_type) = match &dv.value {
            Some(v) => convert::decode(v),
            None => (None, "Empty".to_string()),
        };
        Update {
            node,
            value,
            value_type,
            status: status_name(status),
            good: status.is_good(),
            source_ms: dv.source_timestamp.as_ref().and_then(convert::unix_ms),
            server_ms: dv.server_timestamp.as_ref().and_then(convert::unix_ms),
            seq,
            from_read,
            received_at: Instant::now(),
            asked_at: None,
        }
    }

    /// An update reporting a status for `node` without a value (an invalid or unknown node).
    pub(crate) fn status_only(node: String, status: StatusCode, seq: u64) -> Update {
        Update {
            node,
            value: None,
            value_type: "Empty".to_string(),
            status: status_name(status),
            good: false,
            source_ms: None,
            server_ms: None,
            seq,
            from_read: false,
            received_at: Instant::now(),
            asked_at: None,
        }
    }
}

/// The server accepted a write or a method call.
///
/// This moves a command to `running`, never to `completed` (docs/architecture.md): `Good` means
/// the server took the request, and `Good_CompletesAsynchronously` says outright that the work goes
/// on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// The fence: the number of the last value handed out on this connection before the
    /// acknowledgement arrived (received, or requested by a read in flight). Only an
    /// [`Update`] with `seq > fence` was read after the acknowledgement — a fresh read.
    pub seq: u64,
    /// The status name (`Good`, `Good_CompletesAsynchronously`, `Uncertain_…`); never Bad —
    /// a Bad status is an [`Error`](crate::Error).
    pub status: String,
    /// The server's clock when it answered (response header), milliseconds since the Unix epoch.
    pub server_ms: Option<i64>,
    /// When the acknowledgement was received.
    pub at: Instant,
}
