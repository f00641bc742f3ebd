//! Bridge tools for devices declared `raw_access = true`. CAN: every DBC signal seen on the bus
//! with its value, unit and age (`can_signals`), and a frame decoded through the device's DBC
//! (`can_decode`). OPC UA: a bounded browse of the address space (`opcua_browse`) and a read of
//! any nodes with their statuses (`opcua_read`). Read-only: nothing here writes to a device.

//!
//! Each is a function over the device's link (the engine hands out the link of a `raw_access`
//! device); a link of another protocol is refused with `INVALID_PARAMS`.

use crate::can::CanLink;
use crate::opcua::OpcuaLink;
use closedloop_contract::ErrorCode;
use closedloop_link::{Link, RawError, clock::rfc3339};
use serde::Serialize;

/// One DBC signal as last seen on the bus.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CanSignalState {
    /// The DBC signal.
    pub name: String,
    /// The message that carries it.
    pub message: String,
    /// Its physical value; `None` when no frame of its message has been seen yet, or when the
    /// last one carried a raw value the DBC labels not available.
    pub value: Option<f64>,
    /// When the last frame carried a raw value the DBC labels not available: what and which
    /// (`raw 255, labelled "SNA"`) — never its scaled number, which is no reading.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_available: Option<String>,
    /// The DBC's unit (may be empty).
    pub unit: String,
    /// When its frame arrived.
    pub at: Option<String>,
    /// Seconds since then.
    pub age_s: Option<f64>,
}

/// A frame decoded through a DBC.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CanDecoded {
    /// The message the id names.
    pub message: String,
    /// Its id.
    pub id: u32,
    /// Whether the id is extended (29-bit).
    pub extended: bool,
    /// Each signal the frame carries (multiplexed ones only when selected).
    pub signals: Vec<CanDecodedSignal>,
}

/// One signal of a decoded frame.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CanDecodedSignal {
    /// The DBC signal.
    pub name: String,
    /// Its physical value; `None` when the frame carries a raw value the DBC labels not
    /// available.
    pub value: Option<f64>,
    /// The DBC's unit (may be empty).
    pub unit: String,
    /// What the frame carries instead of a value (`raw 255, labelled "SNA"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_available: Option<String>,
}

/// A raw value and the label that says it is none, in words.
fn not_available_words(raw: i128, label: &str) -> String {
    format!("raw {raw}, labelled {label:?}")
}

fn refuse(code: ErrorCode, detail: impl Into<String>) -> RawError {
    RawError {
        code,
        detail: detail.into(),
    }
}

fn can_link(link: &dyn Link) -> Result<&CanLink, RawError> {
    link.as_any().downcast_ref::<CanLink>().ok_or_else(|| {
        refuse(
            ErrorCode::InvalidParams,
            format!(
                "the device is reached by {}, not on a CAN bus",
                link.describe()
            ),
        )
    })
}

/// Every signal of the device's DBC (or only `names`), with its latest value and age.
pub fn can_signals(
    link: &dyn Link,
    now_ms: i64,
    names: Option<&[String]>,
) -> Result<Vec<CanSignalState>, RawError> {
    let io = can_link(link)?;
    let all: Vec<(&str, &closedloop_can::Signal)> = io
        .dbc()
        .messages()
        .iter()
        .flat_map(|m| m.signals().iter().map(move |s| (m.name(), s)))
        .collect();
    if let Some(names) = names
        && let Some(unknown) = names
            .iter()
            .find(|n| !all.iter().any(|(_, s)| s.name == **n))
    {
        return Err(refuse(
            ErrorCode::InvalidParams,
            format!(
                "{} has no signal {unknown:?}; call can_signals without names to list them",
                io.dbc().file()
            ),
        ));
    }
    let seen = io.seen();
    let now = now_ms;
    Ok(all
        .into_iter()
        .filter(|(_, s)| names.is_none_or(|n| n.contains(&s.name)))
        .map(|(message, s)| {
            let last = seen.get(&s.name).filter(|(_, _, m)| m == message);
            let field = last.map(|(f, _, _)| f);
            CanSignalState {
                name: s.name.clone(),
                message: message.to_string(),
                value: field.and_then(|f| f.as_ref().ok().copied()),
                not_available: field
                    .and_then(|f| f.as_ref().err())
                    .map(|(raw, label)| not_available_words(*raw, label)),
                unit: s.unit.clone(),
                at: last.map(|(_, at, _)| rfc3339(*at)),
                age_s: last.map(|(_, at, _)| (now - at).max(0) as f64 / 1000.0),
            }
        })
        .collect())
}

/// Decodes `data` as the message with `id` in the device's DBC (a standard id first, then an
/// extended one).
pub fn can_decode(link: &dyn Link, id: u32, data: &[u8]) -> Result<CanDecoded, RawError> {
    let io = can_link(link)?;
    let message = io
        .dbc()
        .message_for(id, false)
        .or_else(|| io.dbc().message_for(id, true))
        .ok_or_else(|| {
            refuse(
                ErrorCode::InvalidParams,
                format!("{} has no message with id 0x{id:X}", io.dbc().file()),
            )
        })?;
    if data.len() > 64 {
        return Err(refuse(
            ErrorCode::InvalidParams,
            format!(
                "{} bytes is not a CAN frame (at most 8, or 64 for CAN FD)",
                data.len()
            ),
        ));
    }
    let signals = closedloop_can::read(message, data)
        .into_iter()
        .map(|(name, field)| CanDecodedSignal {
            name: name.to_string(),
            value: field.value(),
            unit: (message.signal(name))
                .map(|s| s.unit.clone())
                .unwrap_or_default(),
            not_available: match field {
                closedloop_can::Field::NotAvailable { raw, label } => {
                    Some(not_available_words(raw, label))
                }
                closedloop_can::Field::Value(_) => None,
            },
        })
        .collect();
    Ok(CanDecoded {
        message: message.name().to_string(),
        id: message.id(),
        extended: message.extended(),
        signals,
    })
}

/// Most nodes one `opcua_browse` returns: the answer goes to a model's context.
pub const MAX_BROWSE: usize = 200;
/// Most nodes one `opcua_read` reads.
pub const MAX_READ: usize = 50;

/// One node read by `opcua_read`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpcuaValue {
    /// The node.
    pub node: String,
    /// Its value (numbers and bools; `None` for other types or a Bad status).
    pub value: Option<serde_json::Value>,
    /// The variant type received.
    pub value_type: String,
    /// The status name (`Good`, `Bad_NodeIdUnknown`, ...).
    pub status: String,
    /// The device's timestamp of the value, if sent.
    pub source_time: Option<String>,
}

fn opcua_client(link: &dyn Link) -> Result<&closedloop_opcua::OpcuaClient, RawError> {
    match link.as_any().downcast_ref::<OpcuaLink>() {
        Some(l) => Ok(l.client()),
        None => Err(refuse(
            ErrorCode::InvalidParams,
            format!(
                "the device is reached by {}, not an OPC UA server",
                link.describe()
            ),
        )),
    }
}

/// Browses below `node` (`i=85`, the Objects folder, when absent), `depth` levels: page
/// `page` (from 0) of [`MAX_BROWSE`] nodes in breadth-first order; `truncated` says that a
/// next page exists.
pub async fn opcua_browse(
    link: &dyn Link,
    node: &str,
    depth: u32,
    page: usize,
) -> Result<closedloop_opcua::Browse, RawError> {
    let client = opcua_client(link)?;
    if page >= 50 {
        return Err(refuse(
            ErrorCode::InvalidParams,
            "page must be below 50; browse a deeper start node instead",
        ));
    }
    let mut b = client
        .browse(node, depth.clamp(1, 5), MAX_BROWSE * (page + 1))
        .await
        .map_err(|e| opcua_refusal(&e))?;
    b.entries = b.entries.into_iter().skip(MAX_BROWSE * page).collect();
    Ok(b)
}

/// Reads the Value attribute of up to [`MAX_READ`] nodes, each with its status.
pub async fn opcua_read(link: &dyn Link, nodes: &[String]) -> Result<Vec<OpcuaValue>, RawError> {
    let client = opcua_client(link)?;
    if nodes.is_empty() || nodes.len() > MAX_READ {
        return Err(refuse(
            ErrorCode::InvalidParams,
            format!("give 1 to {MAX_READ} nodes, e.g. [\"ns=2;s=Pump1.Speed\"]"),
        ));
    }
    let updates = client.read(nodes).await.map_err(|e| opcua_refusal(&e))?;
    Ok(updates
        .into_iter()
        .map(|u| OpcuaValue {
            value: u.value.map(closedloop_link::value_json),
            value_type: u.value_type,
            status: u.status,
            source_time: u.source_ms.map(rfc3339),
            node: u.node,
        })
        .collect())
}

fn opcua_refusal(e: &closedloop_opcua::Error) -> RawError {
    let code = match closedloop_opcua::classify(e) {
        closedloop_opcua::Class::RegisterInvalid => ErrorCode::InvalidParams,
        closedloop_opcua::Class::Offline => ErrorCode::DeviceOffline,
        _ => ErrorCode::BusNak,
    };
    refuse(code, e.to_string())
}
