//! Decodes and encodes frames through a DBC file, for tests that compare closedloop with other
//! tools (tests/python/test_dbc_cantools.py compares it with cantools).
//!
//! `dbc_decode FILE` prints one JSON line describing the file — `{"file_error": "..."}` when
//! it cannot be loaded, else `{"messages": [...], "refused": [...]}` — then answers each line of
//! stdin with one JSON line:
//!
//! - `decode NAME HEX` → `{"values": {"SIGNAL": number, ...}}`
//! - `encode NAME SIGNAL=BITS,...` (BITS: the f64's 16 hex digits, so no value is rounded on the
//!   way) → `{"hex": "..."}` or `{"error": "..."}`

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use closedloop_can::{ByteOrder, Dbc, Mux, decode, encode};
use serde_json::{Value, json};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: dbc_decode FILE.dbc < requests");
        std::process::exit(2);
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let dbc = match Dbc::load(&path) {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(out, "{}", json!({ "file_error": e.to_string() }));
            return;
        }
    };
    let _ = writeln!(out, "{}", describe(&dbc));
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = answer(&dbc, &line);
        let _ = writeln!(out, "{answer}");
    }
    let _ = out.flush();
}

fn describe(dbc: &Dbc) -> Value {
    let messages: Vec<Value> = dbc
        .messages()
        .iter()
        .map(|m| {
            let signals: Vec<Value> = m
                .signals()
                .iter()
                .map(|s| {
                    json!({
                        "name": s.name, "start": s.start_bit, "length": s.length,
                        "big_endian": s.byte_order == ByteOrder::Big, "signed": s.signed,
                        "factor": s.factor, "offset": s.offset,
                        "mux": match s.mux { Mux::Plain => json!(null), Mux::Switch => json!("switch"), Mux::When(v) => json!(v) },
                        "range": s.physical_range(),
                    })
                })
                .collect();
            json!({ "name": m.name(), "id": m.id(), "extended": m.extended(), "size": m.size(), "fd": m.fd(), "signals": signals })
        })
        .collect();
    let refused: Vec<Value> = dbc
        .refused()
        .map(|(name, e)| json!({ "message": name, "error": e.to_string() }))
        .collect();
    json!({ "messages": messages, "refused": refused })
}

fn answer(dbc: &Dbc, line: &str) -> Value {
    let mut parts = line.splitn(3, ' ');
    let (verb, name, arg) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
    let message = match name.map(|n| dbc.message(n)) {
        Some(Ok(m)) => m,
        Some(Err(e)) => return json!({ "error": e.to_string() }),
        None => {
            return json!({ "error": "expected: decode NAME HEX | encode NAME SIGNAL=BITS,..." });
        }
    };
    match verb {
        Some("decode") => {
            let Some(data) = unhex(arg) else {
                return json!({ "error": format!("not hex: {arg}") });
            };
            let values: serde_json::Map<String, Value> = decode(message, &data)
                .into_iter()
                .map(|(n, v)| (n.to_string(), json!(v)))
                .collect();
            json!({ "values": values })
        }
        Some("encode") => {
            let mut values = BTreeMap::new();
            for pair in arg.split(',').filter(|p| !p.is_empty()) {
                let parsed = pair
                    .split_once('=')
                    .and_then(|(s, bits)| Some((s, u64::from_str_radix(bits, 16).ok()?)));
                let Some((signal, bits)) = parsed else {
                    return json!({ "error": format!("expected SIGNAL=BITS, got {pair}") });
                };
                values.insert(signal.to_string(), f64::from_bits(bits));
            }
            match encode(message, &values) {
                Ok(data) => {
                    json!({ "hex": data.iter().map(|b| format!("{b:02x}")).collect::<String>() })
                }
                Err(e) => json!({ "error": e.to_string() }),
            }
        }
        _ => json!({ "error": format!("unknown request: {line}") }),
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
