//! Loading a DBC file: `can-dbc` parses the text; this file turns its syntax tree into
//! [`Message`]s, refusing (per message, naming file, message and signal) what closedloop does not
//! decode: float signals, extended multiplexing, ids or layouts that do not fit.

use std::collections::HashMap;
use std::path::Path;

use can_dbc::{
    AttributeDefinition, AttributeValue, AttributeValueType, MessageId, MultiplexIndicator,
    NumericValue, SignalExtendedValueType, ValueDescription, ValueType,
};

use super::model::{ByteOrder, Message, Mux, Signal, Unsupported};
use crate::error::DbcError;

/// The messages of one DBC file, and the ones closedloop refused, each with its reason.
///
/// A refused message does not make the file unusable: a plant file that never names it loads;
/// one that names it gets the refusal from [`Dbc::message`] (file, message, signal, reason).
#[derive(Debug, Clone)]
pub struct Dbc {
    /// The file as named in errors (the path given to [`Dbc::load`]).
    file: String,
    messages: Vec<Message>,
    refused: Vec<(String, DbcError)>,
}

impl Dbc {
    /// Reads and parses a DBC file. UTF-8 is expected; a file that is not UTF-8 is read as
    /// Windows-1252, the encoding Vector's tools write.
    pub fn load(path: impl AsRef<Path>) -> Result<Dbc, DbcError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| DbcError::Read {
            file: file.clone(),
            reason: e.to_string(),
        })?;
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => std::borrow::Cow::Borrowed(t),
            Err(_) => can_dbc::decode_cp1252(bytes).ok_or_else(|| DbcError::Read {
                file: file.clone(),
                reason: "neither UTF-8 nor Windows-1252 text".into(),
            })?,
        };
        Dbc::parse(&file, &text)
    }

    /// Parses DBC text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Dbc, DbcError> {
        let ast = can_dbc::Dbc::try_from(text).map_err(|e| DbcError::Parse {
            file: file.to_string(),
            reason: e.to_string(),
        })?;
        let raw_ids = raw_message_ids(text, &ast.messages);
        let mut built = Vec::new();
        for (i, m) in ast.messages.iter().enumerate() {
            let name = long_message_name(&ast, m);
            let result = convert(&ast, m, raw_ids.as_ref().map(|ids| ids[i]));
            built.push((name, result));
        }
        refuse_duplicates(&mut built);
        let mut messages = Vec::new();
        let mut refused = Vec::new();
        for (name, result) in built {
            match result {
                Ok(m) => messages.push(m),
                Err(u) => {
                    let e = refusal(file, &name, u);
                    refused.push((name, e));
                }
            }
        }
        Ok(Dbc {
            file: file.to_string(),
            messages,
            refused,
        })
    }

    /// The file as named in errors.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The messages closedloop decodes and encodes, in file order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The messages closedloop refused, by name, each with the error that says why.
    pub fn refused(&self) -> impl Iterator<Item = (&str, &DbcError)> {
        self.refused.iter().map(|(n, e)| (n.as_str(), e))
    }

    /// The message a plant file names: its refusal if closedloop refused it, or
    /// [`DbcError::UnknownMessage`] if the file has no such message.
    pub fn message(&self, name: &str) -> Result<&Message, DbcError> {
        if let Some(m) = self.messages.iter().find(|m| m.name() == name) {
            return Ok(m);
        }
        if let Some((_, e)) = self.refused.iter().find(|(n, _)| n == name) {
            return Err(e.clone());
        }
        Err(DbcError::UnknownMessage {
            file: self.file.clone(),
            message: name.to_string(),
        })
    }

    /// The message a received frame belongs to, if the file declares (and closedloop accepted)
    /// one with this identifier and format.
    pub fn message_for(&self, id: u32, extended: bool) -> Option<&Message> {
        self.messages
            .iter()
            .find(|m| m.id() == id && m.extended() == extended)
    }
}

/// The error a plant file gets for a refused message: naming the signal at fault when there
/// is one, else the message.
fn refusal(file: &str, message: &str, unsupported: Unsupported) -> DbcError {
    match unsupported.signal {
        Some(signal) => DbcError::Signal {
            file: file.to_string(),
            message: message.to_string(),
            signal,
            reason: unsupported.reason,
        },
        None => DbcError::Message {
            file: file.to_string(),
            message: message.to_string(),
            reason: unsupported.reason,
        },
    }
}

/// Builds one message, or says why not.
fn convert(
    ast: &can_dbc::Dbc,
    m: &can_dbc::Message,
    raw_id: Option<u64>,
) -> Result<Message, Unsupported> {
    let unsupported = |reason: String| Unsupported {
        signal: None,
        reason,
    };
    // can-dbc keeps only 16 bits of a standard id; the raw number from the text tells whether
    // the file asked for more.
    if let Some(raw) = raw_id
        && raw & 0x8000_0000 == 0
        && raw > 0x7FF
    {
        return Err(unsupported(format!(
            "id {raw} ({raw:#x}) does not fit a standard 11-bit identifier"
        )));
    }
    if let Some(raw) = raw_id
        && raw & 0x8000_0000 != 0
        && raw & 0x7FFF_FFFF > 0x1FFF_FFFF
    {
        return Err(unsupported(format!(
            "extended id {:#x} does not fit 29 bits (VECTOR__INDEPENDENT_SIG_MSG, id 0xc0000000, is such a pseudo-message: it holds signals of no frame)",
            raw & 0x7FFF_FFFF
        )));
    }
    let size = usize::try_from(m.size).unwrap_or(usize::MAX);
    let mut signals = Vec::new();
    for s in &m.signals {
        signals.push(convert_signal(ast, m.id, s)?);
    }
    check_mux_values(ast, m)?;
    let (id, extended) = match m.id {
        MessageId::Standard(id) => (u32::from(id), false),
        MessageId::Extended(id) => (id, true),
    };
    Message::new(
        &long_message_name(ast, m),
        id,
        extended,
        size,
        is_fd(ast, m.id),
        signals,
    )
}

/// Accepts `SG_MUL_VAL_` lines only where they restate simple multiplexing (cantools writes them
/// so): the message's one switch, and exactly the signal's own `m<N>` value.
fn check_mux_values(ast: &can_dbc::Dbc, m: &can_dbc::Message) -> Result<(), Unsupported> {
    let mut switches = m
        .signals
        .iter()
        .filter(|s| s.multiplexer_indicator == MultiplexIndicator::Multiplexor);
    let switch = switches.next();
    if switches.next().is_some() {
        return Ok(()); // Message::new refuses the second switch, naming it
    }
    for x in ast
        .extended_multiplex
        .iter()
        .filter(|x| x.message_id == m.id)
    {
        let signal = m.signals.iter().find(|s| s.name == x.signal_name);
        let restates = match (signal.map(|s| s.multiplexer_indicator), switch) {
            (Some(MultiplexIndicator::MultiplexedSignal(v)), Some(sw)) => {
                sw.name == x.multiplexor_signal_name
                    && x.mappings.len() == 1
                    && x.mappings[0].min_value == v
                    && x.mappings[0].max_value == v
            }
            _ => false,
        };
        if !restates {
            let ranges: Vec<String> = x
                .mappings
                .iter()
                .map(|r| format!("{}-{}", r.min_value, r.max_value))
                .collect();
            return Err(Unsupported {
                signal: Some(x.signal_name.clone()),
                reason: format!(
                    "extended multiplexing is not supported (SG_MUL_VAL_ selects it by {} in {})",
                    x.multiplexor_signal_name,
                    ranges.join(", ")
                ),
            });
        }
    }
    Ok(())
}

fn convert_signal(
    ast: &can_dbc::Dbc,
    id: MessageId,
    s: &can_dbc::Signal,
) -> Result<Signal, Unsupported> {
    let name = match ast.signal_attribute(id, &s.name, "SystemSignalLongSymbol") {
        Some(AttributeValue::String(long)) => long.clone(),
        _ => s.name.clone(),
    };
    let refuse = |reason: &str| Unsupported {
        signal: Some(name.clone()),
        reason: reason.to_string(),
    };
    match ast.extended_value_type_for_signal(id, &s.name) {
        None | Some(SignalExtendedValueType::SignedOrUnsignedInteger) => {}
        Some(
            SignalExtendedValueType::IEEEfloat32Bit | SignalExtendedValueType::IEEEdouble64bit,
        ) => {
            return Err(refuse(
                "IEEE float signals (SIG_VALTYPE_ 1 or 2) are not supported",
            ));
        }
    }
    let mux = match s.multiplexer_indicator {
        MultiplexIndicator::Plain => Mux::Plain,
        MultiplexIndicator::Multiplexor => Mux::Switch,
        MultiplexIndicator::MultiplexedSignal(v) => Mux::When(v),
        MultiplexIndicator::MultiplexorAndMultiplexedSignal(_) => {
            return Err(refuse(
                "a multiplexed multiplexer (m<N>M, extended multiplexing) is not supported",
            ));
        }
    };
    let length = u8::try_from(s.size).map_err(|_| {
        refuse(&format!(
            "{} bits: signals must be 1 to 64 bits long",
            s.size
        ))
    })?;
    let start_bit = u16::try_from(s.start_bit)
        .map_err(|_| refuse(&format!("start bit {} lies outside any frame", s.start_bit)))?;
    Ok(Signal {
        start_bit,
        length,
        byte_order: match s.byte_order {
            can_dbc::ByteOrder::LittleEndian => ByteOrder::Little,
            can_dbc::ByteOrder::BigEndian => ByteOrder::Big,
        },
        signed: s.value_type == ValueType::Signed,
        factor: s.factor,
        offset: s.offset,
        min: numeric(s.min),
        max: numeric(s.max),
        unit: s.unit.clone(),
        mux,
        not_available: not_available(ast, id, &s.name),
        name,
    })
}

/// The raw values the signal's `VAL_` table labels as not available, with their labels.
fn not_available(ast: &can_dbc::Dbc, id: MessageId, signal: &str) -> Vec<(i128, String)> {
    let table = ast.value_descriptions.iter().find_map(|d| match d {
        ValueDescription::Signal {
            message_id,
            name,
            value_descriptions,
        } if *message_id == id && name == signal => Some(value_descriptions),
        _ => None,
    });
    (table.into_iter().flatten())
        .filter(|v| means_not_available(&v.description))
        .map(|v| (i128::from(v.id), v.description.clone()))
        .collect()
}

/// Whether a value label says the value is not there: `SNA`, `Signal not available`,
/// `Not Available`, `N/A`, `NA`, `Unavailable`, `Invalid`, `Not valid`, `No value` (case,
/// spaces and punctuation ignored). `Error` is not among them: in a status table it is a state
/// the device reports, and a reading.
pub(crate) fn means_not_available(label: &str) -> bool {
    let word: String = (label.chars())
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    matches!(
        word.as_str(),
        "sna"
            | "signalnotavailable"
            | "notavailable"
            | "valuenotavailable"
            | "na"
            | "unavailable"
            | "invalid"
            | "signalinvalid"
            | "notvalid"
            | "novalue"
    )
}

fn numeric(v: NumericValue) -> f64 {
    match v {
        NumericValue::Uint(u) => u as f64,
        NumericValue::Int(i) => i as f64,
        NumericValue::Double(d) => d,
    }
}

/// The message's name: the `SystemMessageLongSymbol` attribute when present (Vector's tools
/// keep names longer than 32 characters there), else the `BO_` name.
fn long_message_name(ast: &can_dbc::Dbc, m: &can_dbc::Message) -> String {
    match ast.message_attribute(m.id, "SystemMessageLongSymbol") {
        Some(AttributeValue::String(long)) => long.clone(),
        _ => m.name.clone(),
    }
}

/// Whether the file's `VFrameFormat` attribute makes this message a CAN FD frame. Files define
/// it as an ENUM (whose choice names end in `CAN_FD` for FD frames) or as an INT indexing
/// Vector's standard list, in which 14 and 15 are `StandardCAN_FD` and `ExtendedCAN_FD`.
fn is_fd(ast: &can_dbc::Dbc, id: MessageId) -> bool {
    let definition = ast.attribute_definitions.iter().find_map(|d| match d {
        AttributeDefinition::Message(name, ty) if name == "VFrameFormat" => Some(ty),
        _ => None,
    });
    let value = ast.resolved_message_attribute(id, "VFrameFormat");
    let index = match value {
        Some(AttributeValue::Uint(i)) => usize::try_from(*i).ok(),
        Some(AttributeValue::Int(i)) => usize::try_from(*i).ok(),
        Some(AttributeValue::Double(d)) if d.fract() == 0.0 && *d >= 0.0 => Some(*d as usize),
        _ => None,
    };
    match (definition, value) {
        (Some(AttributeValueType::Enum(choices)), Some(AttributeValue::String(s))) => {
            choices.contains(s) && s.ends_with("CAN_FD")
        }
        (Some(AttributeValueType::Enum(choices)), _) => index
            .and_then(|i| choices.get(i))
            .is_some_and(|c| c.ends_with("CAN_FD")),
        (Some(AttributeValueType::Int(..)), _) => matches!(index, Some(14 | 15)),
        _ => false,
    }
}

/// The `BO_` ids exactly as written, in file order, when they line up with what can-dbc parsed
/// (`None` when they do not, e.g. a comment line that starts with `BO_`).
fn raw_message_ids(text: &str, parsed: &[can_dbc::Message]) -> Option<Vec<u64>> {
    let ids: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("BO_"))
        .filter(|rest| rest.starts_with([' ', '\t']))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect();
    let aligned = ids.len() == parsed.len()
        && ids
            .iter()
            .zip(parsed)
            .all(|(&raw, m)| MessageId::try_from(raw).is_ok_and(|id| id == m.id));
    aligned.then_some(ids)
}

/// Two messages with one name, or one identifier, cannot be told apart: both are refused.
fn refuse_duplicates(built: &mut [(String, Result<Message, Unsupported>)]) {
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut ids: HashMap<(u32, bool), usize> = HashMap::new();
    for (name, r) in built.iter() {
        *names.entry(name.clone()).or_default() += 1;
        if let Ok(m) = r {
            *ids.entry((m.id(), m.extended())).or_default() += 1;
        }
    }
    for (name, r) in built.iter_mut() {
        let reason = match r {
            _ if names[name.as_str()] > 1 => "another message of the file has the same name",
            Ok(m) if ids[&(m.id(), m.extended())] > 1 => {
                "another message of the file has the same identifier"
            }
            _ => continue,
        };
        *r = Err(Unsupported {
            signal: None,
            reason: reason.into(),
        });
    }
}

#[cfg(test)]
mod tests;
