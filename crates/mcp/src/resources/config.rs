//! `device://{id}/config`: a device's plant declaration as JSON, for a model that needs to know
//! what a device is, how it is reached and what its actions check — never its secrets.
//!
//! Built by hand rather than by serializing the plant types, so that nothing added to the plant
//! later (a password, a token) can leak into the resource by accident.

use closedloop_plant::{Action, Device, DriverConfig, ParamSpec, Signal, Source, WriteEntry};
use serde_json::{Map, Value, json};

/// The declaration of one device.
pub(crate) fn device(d: &Device) -> Value {
    let signals: Map<String, Value> = d
        .signals
        .iter()
        .map(|s| (s.name.clone(), signal(s)))
        .collect();
    let mut liveness = json!({"max_silence_s": d.liveness.max_silence_s});
    if let Some(c) = d.liveness.counter {
        liveness["counter"] = json!({"holding": c});
    }
    if let Some(t) = &d.liveness.status_topic {
        liveness["status_topic"] = json!(t);
        liveness["online"] = json!(d.liveness.online);
        liveness["offline"] = json!(d.liveness.offline);
    }
    json!({
        "device": d.id,
        "description": d.description,
        "driver": driver(&d.driver),
        "poll_ms": d.poll_ms,
        "request_timeout_ms": d.request_timeout_ms(),
        "liveness": liveness,
        "signals": signals,
        "actions": d.actions.iter().map(action).collect::<Vec<_>>(),
    })
}

/// Connection facts a person would check; credentials are never included, only whether the
/// driver has them.
fn driver(cfg: &DriverConfig) -> Value {
    let mut v = json!({"kind": cfg.kind()});
    match cfg {
        DriverConfig::Sim(sim) => v["model"] = json!(sim.model),
        DriverConfig::ModbusTcp {
            address,
            unit,
            timeout_ms,
            ..
        } => {
            v["address"] = json!(address);
            v["unit"] = json!(unit);
            v["timeout_ms"] = json!(timeout_ms);
        }
        DriverConfig::ModbusRtu {
            port,
            baud,
            parity,
            unit,
            timeout_ms,
            ..
        } => {
            v["port"] = json!(port);
            v["baud"] = json!(baud);
            v["parity"] = json!(parity.letter());
            v["unit"] = json!(unit);
            v["timeout_ms"] = json!(timeout_ms);
        }
        DriverConfig::Mqtt {
            broker,
            client_id,
            username,
            password,
            ..
        } => {
            v["broker"] = json!(broker.to_string());
            v["client_id"] = json!(client_id);
            v["authenticated"] = json!(username.is_some() || password.is_some());
        }
        DriverConfig::Opcua {
            endpoint,
            security,
            username,
            ..
        } => {
            v["endpoint"] = json!(endpoint);
            v["security"] = json!(security.as_str());
            // Whether the session logs in as a user, as for MQTT; the credentials stay out.
            v["authenticated"] = json!(username.is_some());
        }
        DriverConfig::Can {
            interface,
            bitrate,
            dbc,
            ..
        } => {
            v["interface"] = json!(interface.to_string());
            v["bitrate"] = json!(bitrate);
            v["dbc"] = json!(dbc.display().to_string());
        }
    }
    v
}

fn signal(s: &Signal) -> Value {
    let mut v = json!({
        "source": s.source.describe(),
        "type": if s.source.is_bool() { "bool" } else { "number" },
    });
    if let Some(u) = &s.unit {
        v["unit"] = json!(u);
    }
    if let Some(d) = &s.description {
        v["description"] = json!(d);
    }
    if let Source::Register {
        area,
        address,
        encoding,
        ..
    } = &s.source
    {
        v["area"] = json!(area.key());
        v["address"] = json!(address);
        if !area.is_bit() {
            v["register_type"] = json!(encoding.ty);
            v["scale"] = json!(encoding.scale);
            v["offset"] = json!(encoding.offset);
            v["word_order"] = json!(encoding.word_order);
            v["byte_swap"] = json!(encoding.byte_swap);
            if let Some(b) = encoding.bit {
                v["bit"] = json!(b);
            }
        }
    }
    v
}

/// One declared parameter: type, range, unit, description, choices.
pub(crate) fn param(p: &ParamSpec) -> Value {
    let mut v = json!({"type": p.ty.key()});
    if let Some(min) = p.min {
        v["min"] = json!(min);
    }
    if let Some(max) = p.max {
        v["max"] = json!(max);
    }
    if let Some(u) = &p.unit {
        v["unit"] = json!(u);
    }
    if let Some(d) = &p.description {
        v["description"] = json!(d);
    }
    if let Some(c) = &p.choices {
        v["enum"] = json!(c);
    }
    if let Some(q) = &p.ask {
        v["ask"] = json!(q);
    }
    v
}

fn action(a: &Action) -> Value {
    let params: Map<String, Value> = a
        .params
        .iter()
        .map(|p| (p.name.clone(), param(p)))
        .collect();
    let fail_when: Map<String, Value> = a
        .fail_when
        .iter()
        .map(|(code, e)| (code.clone(), json!(e.source())))
        .collect();
    let writes = |plan: &[WriteEntry]| plan.iter().map(WriteEntry::describe).collect::<Vec<_>>();
    let src = |e: &Option<closedloop_plant::Expr>| e.as_ref().map(|e| e.source().to_string());
    json!({
        "name": a.name,
        "tool": a.tool_name,
        "description": a.description,
        "params": params,
        "requires": src(&a.requires),
        "write": writes(&a.write),
        "done_when": src(&a.done_when),
        "fail_when": fail_when,
        "started_when": src(&a.started_when),
        "hold_ms": a.hold_ms,
        "expect_s": a.expect_s.source(),
        "timeout_factor": a.timeout_factor,
        "timeout_floor_ms": a.timeout_floor_ms,
        "queue_timeout_s": a.queue_timeout_s,
        "cancel": writes(&a.cancel),
        "stopped_when": src(&a.stopped_when),
        "verification": a.verification.as_str(),
        "idempotent": a.idempotent,
        "confirm": a.confirm,
        "queue": a.queue,
        "exclusive": a.exclusive,
        "destructive": a.destructive,
    })
}
