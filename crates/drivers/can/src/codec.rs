//! Decoding frames into physical signal values and encoding values into frames, through a
//! [`Message`]'s layout. Pure functions; the bit layout is [`Signal::bits`] alone, so decoding and
//! encoding cannot disagree with each other.

use std::collections::BTreeMap;

use crate::dbc::{Message, Mux, Signal};
use crate::error::EncodeError;

/// The signals a frame carries, with their physical values (raw × factor + offset), in the
/// message's signal order.
///
/// Multiplexing is honoured: a multiplexed signal appears only when the switch's raw value
/// selects it; a switch value the file does not define yields the plain signals and the switch
/// alone. A signal whose bits lie beyond `data` (a frame shorter than the message) is left out,
/// never read as zeros; bytes beyond the message's size are ignored.
pub fn decode<'m>(message: &'m Message, data: &[u8]) -> Vec<(&'m str, f64)> {
    let selected = message.switch().and_then(|s| raw(s, data));
    message
        .signals()
        .iter()
        .filter(|s| match s.mux {
            Mux::Plain | Mux::Switch => true,
            Mux::When(v) => selected == Some(i128::from(v)),
        })
        .filter_map(|s| Some((s.name.as_str(), physical(s, raw(s, data)?))))
        .collect()
}

/// What a frame says of one signal, as anything that shows or decides on it must take it: its
/// physical value, or the raw value and label the file's `VAL_` table gives to say the device
/// has none (`SNA`) — whose scaled number is no reading at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Field<'m> {
    /// raw × factor + offset.
    Value(f64),
    /// The raw value carries a label that says "not available" ([`Signal::not_available`]).
    NotAvailable {
        /// The raw field value.
        raw: i128,
        /// The file's label for it (`SNA`, `Invalid`).
        label: &'m str,
    },
}

impl Field<'_> {
    /// The physical value, when it is one.
    pub fn value(self) -> Option<f64> {
        match self {
            Field::Value(v) => Some(v),
            Field::NotAvailable { .. } => None,
        }
    }
}

/// The signals a frame carries, like [`decode`], each as a [`Field`]: a value, or not available
/// in this frame. The one reading every consumer of received frames uses (the device's signals,
/// the bus's last-seen table, the raw `can_decode` tool).
pub fn read<'m>(message: &'m Message, data: &[u8]) -> Vec<(&'m str, Field<'m>)> {
    decode(message, data)
        .into_iter()
        .map(|(name, v)| {
            let mark = (message.signal(name)).and_then(|s| not_available(s, data));
            let field = match mark {
                Some((raw, label)) => Field::NotAvailable { raw, label },
                None => Field::Value(v),
            };
            (name, field)
        })
        .collect()
}

/// One signal's physical value in `data`, regardless of multiplexing; `None` when its bits lie
/// beyond `data`.
pub fn decode_signal(signal: &Signal, data: &[u8]) -> Option<f64> {
    raw(signal, data).map(|r| physical(signal, r))
}

/// The label the file gives the raw value `signal` carries in `data`, when that label says the
/// value is not available (see [`Signal::not_available`]); `None` for a value, or when `data` is
/// too short to hold the signal.
pub fn not_available<'s>(signal: &'s Signal, data: &[u8]) -> Option<(i128, &'s str)> {
    let raw = raw(signal, data)?;
    // Files write a signed signal's marks as its bit pattern too (255 "SNA" for an 8-bit -1).
    let bits = match raw < 0 {
        true => raw + (1i128 << signal.length),
        false => raw,
    };
    (signal.not_available.iter())
        .find(|(n, _)| *n == raw || *n == bits)
        .map(|(n, label)| (*n, label.as_str()))
}

/// The raw field value (sign-extended for signed signals), or `None` if `data` is too short.
fn raw(signal: &Signal, data: &[u8]) -> Option<i128> {
    let mut value: u64 = 0;
    for (k, bit) in signal.bits().into_iter().enumerate() {
        let byte = *data.get((bit / 8) as usize)?;
        if byte >> (bit % 8) & 1 == 1 {
            value |= 1 << k;
        }
    }
    let n = u32::from(signal.length);
    if signal.signed && n < 64 && value >> (n - 1) & 1 == 1 {
        Some(i128::from(value) - (1i128 << n))
    } else if signal.signed && n == 64 {
        Some(i128::from(value as i64))
    } else {
        Some(i128::from(value))
    }
}

/// raw × factor + offset, computed in f64 the way cantools computes it (the raw value rounded to
/// the nearest f64 first, then one multiplication and one addition, never fused).
fn physical(signal: &Signal, raw: i128) -> f64 {
    (raw as f64) * signal.factor + signal.offset
}

/// Encodes physical values into a frame of the message's size; bits no signal uses are 0.
///
/// Every signal the frame carries must be given: the plain ones, the multiplexer switch, and the
/// multiplexed signals its value selects (and no others). raw = (value − offset) / factor,
/// rounded to the nearest integer (ties to even, as cantools does); NaN, or a raw value the field
/// cannot hold, is an error naming the message and signal — never saturated.
pub fn encode(message: &Message, values: &BTreeMap<String, f64>) -> Result<Vec<u8>, EncodeError> {
    let mname = || message.name().to_string();
    if let Some(unknown) = values.keys().find(|k| message.signal(k).is_none()) {
        return Err(EncodeError::UnknownSignal {
            message: mname(),
            signal: unknown.clone(),
        });
    }
    // The switch's raw value decides which multiplexed signals belong to the frame.
    let selected = selected_by_switch(message, values)?;
    let mut data = vec![0u8; message.size()];
    for s in message.signals() {
        if let (Mux::When(when), Some((switch, raw, value))) = (s.mux, selected)
            && i128::from(when) != raw
        {
            if values.contains_key(&s.name) {
                return Err(EncodeError::NotSelected {
                    message: mname(),
                    signal: s.name.clone(),
                    switch: switch.name.clone(),
                    when,
                    value,
                });
            }
            continue;
        }
        let value = *values.get(&s.name).ok_or_else(|| EncodeError::Missing {
            message: mname(),
            signal: s.name.clone(),
        })?;
        write_field(&mut data, s, to_raw(message, s, value)?);
    }
    Ok(data)
}

/// The multiplexer switch with its raw and physical value, when the message has one; `None`
/// for a message without multiplexing. The switch's value must be given and, when any signal
/// depends on it, be one of the values the file defines.
fn selected_by_switch<'m>(
    message: &'m Message,
    values: &BTreeMap<String, f64>,
) -> Result<Option<(&'m Signal, i128, f64)>, EncodeError> {
    let Some(switch) = message.switch() else {
        return Ok(None);
    };
    let value = *values
        .get(&switch.name)
        .ok_or_else(|| EncodeError::Missing {
            message: message.name().to_string(),
            signal: switch.name.clone(),
        })?;
    let raw = to_raw(message, switch, value)?;
    let defined: Vec<u64> = defined_mux_values(message);
    // A switch no signal depends on (a file may declare one) selects nothing to check.
    if !defined.is_empty() && !defined.iter().any(|&d| i128::from(d) == raw) {
        return Err(EncodeError::UnknownMuxValue {
            message: message.name().to_string(),
            switch: switch.name.clone(),
            value,
            defined: defined
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(Some((switch, raw, value)))
}

/// Sets the bits of `signal`'s field in `data` to the raw value, in two's complement in the
/// field's width (the low `length` bits of `raw`); bits already set stay set.
fn write_field(data: &mut [u8], signal: &Signal, raw: i128) {
    let bits = raw as u64;
    for (k, bit) in signal.bits().into_iter().enumerate() {
        if bits >> k & 1 == 1 {
            data[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }
}

/// The switch values the message's multiplexed signals name, ascending, without repeats.
fn defined_mux_values(message: &Message) -> Vec<u64> {
    let mut v: Vec<u64> = message
        .signals()
        .iter()
        .filter_map(|s| match s.mux {
            Mux::When(v) => Some(v),
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The raw integer for a physical value, or why there is none.
fn to_raw(message: &Message, s: &Signal, value: f64) -> Result<i128, EncodeError> {
    if value.is_nan() {
        return Err(EncodeError::NotANumber {
            message: message.name().to_string(),
            signal: s.name.clone(),
        });
    }
    let raw = ((value - s.offset) / s.factor).round_ties_even();
    let (lo, hi_exclusive) = s.raw_bounds();
    if !(raw >= lo && raw < hi_exclusive) {
        let (min, max) = s.physical_range();
        return Err(EncodeError::OutOfRange {
            message: message.name().to_string(),
            signal: s.name.clone(),
            value,
            min,
            max,
        });
    }
    // Exact: `raw` is an integer within ±2⁶⁴.
    Ok(raw as i128)
}

#[cfg(test)]
mod tests;
