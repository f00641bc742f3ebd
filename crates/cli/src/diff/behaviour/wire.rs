//! What is read over the wire: a device's driver and endpoint, how it counts as alive, where
//! each signal is read and how it is scaled, each rendered in full so that a word order, a
//! scale or a topic that changed is named (what is written: [`super::plans`]).

use super::action::rate;
use super::{Class, Shift, num, or_none};
use closedloop_contract::{Encoding, WordOrder};
use closedloop_plant::{Device, DriverConfig, Signal, Source};

/// A driver in words: `modbus-tcp 10.0.0.5:502 unit 1 (timeout 500 ms)`.
pub(super) fn driver(d: &DriverConfig) -> String {
    match d {
        DriverConfig::Sim(s) => format!("sim {}", s.model),
        DriverConfig::ModbusTcp {
            address,
            unit,
            timeout_ms,
        } => {
            format!("modbus-tcp {address} unit {unit} (timeout {timeout_ms} ms)")
        }
        DriverConfig::ModbusRtu {
            port,
            baud,
            parity,
            unit,
            timeout_ms,
        } => {
            let parity = parity.letter();
            format!(
                "modbus-rtu {port} {baud} baud parity {parity} unit {unit} (timeout {timeout_ms} ms)"
            )
        }
        DriverConfig::Mqtt {
            broker,
            client_id,
            username,
            ..
        } => {
            format!(
                "mqtt {broker} as {client_id} user {}",
                or_none(username.as_deref())
            )
        }
        DriverConfig::Opcua {
            endpoint,
            security,
            username,
            ..
        } => {
            format!(
                "opcua {endpoint} security {security} user {}",
                or_none(username.as_deref())
            )
        }
        DriverConfig::Can {
            interface,
            bitrate,
            dbc,
        } => {
            format!("can {interface} {bitrate} bit/s dbc {}", dbc.display())
        }
    }
}

/// The device's own settings and signals.
pub(super) fn device(a: &Device, b: &Device) -> Vec<Shift> {
    let place = a.id.as_str();
    let mut out = connection(place, a, b);
    out.extend(liveness(place, &a.liveness, &b.liveness));
    out.extend(access(place, a, b));
    out.extend(rate(
        place,
        "max_rate",
        a.max_rate.as_ref(),
        b.max_rate.as_ref(),
    ));
    out.extend(signals(place, &a.signals, &b.signals));
    out
}

/// `driver` and `poll_ms`: which connection is read, and how often.
fn connection(place: &str, a: &Device, b: &Device) -> Vec<Shift> {
    let mut out = Vec::new();
    let mut push = |key: &str, words: (String, String), meaning: String, class| {
        out.push(Shift::new(place, key, words, meaning, class));
    };
    if a.driver != b.driver {
        let (x, y) = (driver(&a.driver), driver(&b.driver));
        let meaning = if x == y {
            "the driver's other settings (credentials, certificates, simulator) changed".to_string()
        } else {
            "read and written over another connection".to_string()
        };
        push("driver", (x, y), meaning, Class::Changed);
    }
    if a.poll_ms != b.poll_ms {
        let words = (format!("{} ms", a.poll_ms), format!("{} ms", b.poll_ms));
        let meaning = format!(
            "read every {} ms: a criterion is judged on values up to that old",
            b.poll_ms
        );
        push("poll_ms", words, meaning, Class::Changed);
    }
    out
}

/// `liveness.*`: when the device counts as online, so when commands to it are refused.
fn liveness(
    place: &str,
    la: &closedloop_plant::Liveness,
    lb: &closedloop_plant::Liveness,
) -> Vec<Shift> {
    let mut out = Vec::new();
    let mut push = |key: &str, words: (String, String), meaning: String, class| {
        out.push(Shift::new(place, key, words, meaning, class));
    };
    if la.max_silence_s != lb.max_silence_s {
        let words = (
            format!("{} s", num(la.max_silence_s)),
            format!("{} s", num(lb.max_silence_s)),
        );
        let meaning = format!(
            "counted online until {} s without a valid answer",
            num(lb.max_silence_s)
        );
        push(
            "liveness.max_silence_s",
            words,
            meaning,
            Class::wider(lb.max_silence_s > la.max_silence_s),
        );
    }
    if la.counter != lb.counter {
        let words = (or_none(la.counter), or_none(lb.counter));
        let meaning = match lb.counter {
            Some(r) => format!("counted offline when holding register {r} stops changing"),
            None => "a frozen device that still answers counts as online".to_string(),
        };
        let class = match (la.counter, lb.counter) {
            (Some(_), Some(_)) => Class::Changed,
            _ => Class::wider(lb.counter.is_none()),
        };
        push("liveness.counter", words, meaning, class);
    }
    let status = |l: &closedloop_plant::Liveness| {
        format!(
            "{} ({} / {})",
            or_none(l.status_topic.as_deref()),
            l.online,
            l.offline
        )
    };
    if status(la) != status(lb) {
        push(
            "liveness.status_topic",
            (status(la), status(lb)),
            "online and offline are heard on another topic or payload".into(),
            Class::Changed,
        );
    }
    out
}

/// `raw_access` and `gateways`: who may reach the device besides its actions.
fn access(place: &str, a: &Device, b: &Device) -> Vec<Shift> {
    let mut out = Vec::new();
    if a.raw_access != b.raw_access {
        let meaning = if b.raw_access {
            "raw register writes allowed beside its actions"
        } else {
            "raw register writes refused"
        };
        out.push(Shift::new(
            place,
            "raw_access",
            (a.raw_access.to_string(), b.raw_access.to_string()),
            meaning,
            Class::wider(b.raw_access),
        ));
    }
    if a.gateways != b.gateways {
        let words = (format!("{:?}", a.gateways), format!("{:?}", b.gateways));
        out.push(Shift::new(
            place,
            "gateways",
            words,
            "served by other gateways",
            Class::Changed,
        ));
    }
    out
}

fn signals(place: &str, a: &[Signal], b: &[Signal]) -> Vec<Shift> {
    let mut out = Vec::new();
    for s in a {
        let key = format!("signal {}", s.name);
        let Some(t) = b.iter().find(|t| t.name == s.name) else {
            let meaning = "no longer read";
            out.push(Shift::new(
                place,
                key,
                (source(s), "none".into()),
                meaning,
                Class::Changed,
            ));
            continue;
        };
        if s.source != t.source {
            let meaning = source_meaning(&s.source, &t.source);
            out.push(Shift::new(
                place,
                &key,
                (source(s), source(t)),
                meaning,
                Class::Changed,
            ));
        }
        if s.unit != t.unit {
            let words = (or_none(s.unit.as_deref()), or_none(t.unit.as_deref()));
            let meaning = "the same number now means another unit: every criterion reading it";
            out.push(Shift::new(
                place,
                format!("{key} unit"),
                words,
                meaning,
                Class::Changed,
            ));
        }
    }
    for t in b.iter().filter(|t| a.iter().all(|s| s.name != t.name)) {
        let key = format!("signal {}", t.name);
        out.push(Shift::new(
            place,
            key,
            ("none".into(), source(t)),
            "now read",
            Class::Changed,
        ));
    }
    out
}

/// A signal's source in full: `input:0 i16 ×0.1`, `lab/t /temp f64`.
fn source(s: &Signal) -> String {
    match &s.source {
        Source::Register {
            area,
            address,
            encoding,
        } => format!("{area}:{address} {}", encoding_words(encoding)),
        Source::Topic {
            topic,
            json,
            true_values,
            false_values,
            ty,
            time_json,
        } => {
            let trues = if true_values.is_empty() && false_values.is_empty() {
                String::new()
            } else {
                format!(" true={true_values:?} false={false_values:?}")
            };
            let time = time_json
                .as_deref()
                .map_or(String::new(), |t| format!(" taken at {t}"));
            format!(
                "topic {topic} {} {ty}{trues}{time}",
                json.as_deref().unwrap_or("(raw payload)")
            )
        }
        Source::Node { node, ty } => format!("node {node} {ty}"),
        Source::Can {
            message,
            signal,
            ty,
        } => format!("CAN {message} {signal} {ty}"),
    }
}

fn source_meaning(a: &Source, b: &Source) -> String {
    match (a, b) {
        (
            Source::Register {
                area: x,
                address: i,
                encoding: e,
            },
            Source::Register {
                area: y,
                address: j,
                encoding: f,
            },
        ) if x == y && i == j => format!(
            "the same registers now read as another number: {}",
            encoding_change(e, f, "reads")
        ),
        _ => "read from another place: every criterion, alarm and page reading it follows"
            .to_string(),
    }
}

/// `u16`, `f32 low word first`, `i16 ×0.1 +5`, `bit 3`.
pub(super) fn encoding_words(e: &Encoding) -> String {
    let mut s = e.ty.to_string();
    if e.word_order == WordOrder::Little {
        s.push_str(" low word first");
    }
    if e.byte_swap {
        s.push_str(" bytes swapped");
    }
    if let Some(b) = e.bit {
        s.push_str(&format!(" bit {b}"));
    }
    if e.scale != 1.0 {
        s.push_str(&format!(" ×{}", num(e.scale)));
    }
    if e.offset != 0.0 {
        s.push_str(&format!(" {:+}", e.offset));
    }
    s
}

/// What an encoding change does to a value: `scale 0.1 → 1: the device receives 0.1 × the
/// number for the same value`.
pub(super) fn encoding_change(a: &Encoding, b: &Encoding, verb: &str) -> String {
    let mut parts = Vec::new();
    if a.ty != b.ty {
        parts.push(format!("type {} → {}", a.ty, b.ty));
    }
    if a.word_order != b.word_order {
        parts.push(
            format!(
                "word order {:?} → {:?}: a value of two or more registers {verb} as another number",
                a.word_order, b.word_order
            )
            .to_lowercase(),
        );
    }
    if a.byte_swap != b.byte_swap {
        parts.push(format!("bytes swapped {} → {}", a.byte_swap, b.byte_swap));
    }
    if a.bit != b.bit {
        parts.push(format!("bit {} → {}", or_none(a.bit), or_none(b.bit)));
    }
    if a.scale != b.scale {
        let ratio = if verb == "reads" {
            b.scale / a.scale
        } else {
            a.scale / b.scale
        };
        let who = if verb == "reads" {
            "the same raw value reads as"
        } else {
            "the device receives"
        };
        parts.push(format!(
            "scale {} → {}: {who} {} × the old number",
            num(a.scale),
            num(b.scale),
            num(ratio)
        ));
    }
    if a.offset != b.offset {
        parts.push(format!("offset {} → {}", num(a.offset), num(b.offset)));
    }
    parts.join("; ")
}
