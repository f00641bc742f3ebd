//! What is written: every entry of an action's write and cancel plans, rendered in full
//! (address, type, word and byte order, scale, value; topic, QoS and payload template; node;
//! method and arguments; CAN message, signals and cycle), compared position by position.

use super::wire::{encoding_change, encoding_words};
use super::{Class, Shift, or_none};
use closedloop_plant::{Action, WriteEntry};

/// One write entry in full.
fn entry(e: &WriteEntry) -> String {
    match e {
        WriteEntry::Register {
            area,
            address,
            encoding,
            value,
        } => {
            format!(
                "{area}:{address} {} = {}",
                encoding_words(encoding),
                value.source()
            )
        }
        WriteEntry::Mqtt {
            topic,
            payload,
            qos,
        } => format!("mqtt {topic} qos {qos}: {}", payload.source()),
        WriteEntry::OpcuaNode { node, value } => format!("{node} = {}", value.source()),
        WriteEntry::OpcuaMethod {
            method,
            object,
            args,
        } => {
            let args: Vec<&str> = args.iter().map(|a| a.source()).collect();
            format!("call {method} on {object}({})", args.join(", "))
        }
        WriteEntry::Can {
            message,
            signals,
            cycle_ms,
        } => {
            let sigs: Vec<String> = signals
                .iter()
                .map(|(n, v)| format!("{n} = {}", v.source()))
                .collect();
            let every = cycle_ms
                .map(|c| format!(" every {c} ms"))
                .unwrap_or_default();
            format!("CAN {message} {{{}}}{every}", sigs.join(", "))
        }
        other => other.describe(),
    }
}

/// The write and cancel plans, entry by entry.
pub(super) fn compare(place: &str, (a, b): (&Action, &Action)) -> Vec<Shift> {
    let mut out = entries(place, "write", &a.write, &b.write);
    out.extend(entries(place, "cancel", &a.cancel, &b.cancel));
    out
}

fn entries(place: &str, plan: &str, a: &[WriteEntry], b: &[WriteEntry]) -> Vec<Shift> {
    let mut out = Vec::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        let (wx, wy) = (or_none(x.map(entry)), or_none(y.map(entry)));
        if wx == wy {
            continue;
        }
        let (meaning, class) = match (x, y) {
            (
                Some(WriteEntry::Register {
                    area: p,
                    address: i,
                    encoding: e,
                    value: v,
                }),
                Some(WriteEntry::Register {
                    area: q,
                    address: j,
                    encoding: f,
                    value: w,
                }),
            ) if p == q && i == j && v.source() == w.source() => {
                (encoding_change(e, f, "is written"), Class::Changed)
            }
            (Some(_), None) if plan == "cancel" => (
                "a cancel no longer writes this: the safe state may not be reached".to_string(),
                Class::Looser,
            ),
            (None, Some(_)) if plan == "cancel" => {
                ("a cancel also writes this".to_string(), Class::Stricter)
            }
            (Some(_), None) => ("no longer written".to_string(), Class::Changed),
            (None, Some(_)) => ("also written".to_string(), Class::Changed),
            _ => (
                "writes something else to the device".to_string(),
                Class::Changed,
            ),
        };
        out.push(Shift::new(
            place,
            format!("{plan}[{i}]"),
            (wx, wy),
            meaning,
            class,
        ));
    }
    out
}
