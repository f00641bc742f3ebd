//! Write and cancel plans: each entry's kind, its fit with the driver, and its values.

use super::action::ActionCheck;
use super::exprs::{ExprCtx, Want, check, check_template};
use super::register::{RegKeys, SourceFamily, family};
use crate::action::WriteEntry;
use crate::model::{RawWrite, typed};
use closedloop_driver::Area;

impl ActionCheck<'_> {
    pub(super) fn plan(
        &mut self,
        key: &str,
        entries: &[toml::Value],
        ctx: &ExprCtx,
    ) -> Vec<WriteEntry> {
        let mut out = Vec::new();
        for (i, v) in entries.iter().enumerate() {
            let k = format!("{key}[{i}]");
            let keys: Vec<String> = v
                .as_table()
                .map(|t| t.keys().cloned().collect())
                .unwrap_or_default();
            let full = format!("{}.{k}", self.key);
            let raw = match typed::<RawWrite>(v.clone(), &full) {
                Ok(r) => r,
                Err((ek, m)) => {
                    self.dev.err(self.sink, &ek, m);
                    continue;
                }
            };
            if let Some(w) = self.entry(&k, raw, &keys, ctx) {
                out.push(w);
            }
        }
        out
    }

    fn entry(
        &mut self,
        k: &str,
        raw: RawWrite,
        keys: &[String],
        ctx: &ExprCtx,
    ) -> Option<WriteEntry> {
        let fam = family(keys, WRITE_KEYS).map_err(|m| self.err(k, m)).ok()?;
        if let Some(d) = self.driver {
            fam.fits(d).map_err(|m| self.err(k, m)).ok()?;
        }
        let need = |this: &mut Self, field: &str, what: &str| {
            this.err(&format!("{k}.{field}"), format!("missing {field}; {what}"))
        };
        match fam {
            SourceFamily::Register => {
                let (area, address, encoding) = RegKeys::from(&raw)
                    .resolve()
                    .map_err(|(ek, m)| self.err(&crate::error::join(k, &ek), m))
                    .ok()?;
                if !area.is_writable() {
                    let instead = if area == Area::DiscreteInput {
                        "coil"
                    } else {
                        "holding"
                    };
                    self.err(
                        &format!("{k}.{}", area.key()),
                        format!(
                            "{} {} is read-only and cannot be written; write a {instead} instead",
                            if area == Area::Input { "an" } else { "a" },
                            area.key()
                        ),
                    );
                    return None;
                }
                if encoding.bit.is_some() {
                    self.err(&format!("{k}.bit"), "a single bit of a register cannot be written without clobbering the others; write the whole register");
                    return None;
                }
                let Some(value) = raw.value else {
                    need(self, "value", "write value = \"<expression>\"");
                    return None;
                };
                let want = if area == Area::Coil {
                    Want::Bool
                } else {
                    Want::Value
                };
                let value = check(ctx, &value.0, want)
                    .map_err(|m| self.err(&format!("{k}.value"), m))
                    .ok()?;
                Some(WriteEntry::Register {
                    area,
                    address,
                    encoding,
                    value,
                })
            }
            SourceFamily::Topic => {
                let topic = raw.topic.unwrap_or_default();
                if topic.is_empty() || topic.contains(['+', '#']) {
                    self.err(
                        &format!("{k}.topic"),
                        "write to one concrete topic (no empty topic, no + or # wildcards)",
                    );
                }
                let Some(payload) = raw.payload else {
                    need(
                        self,
                        "payload",
                        "write payload = \"...\" (${...} interpolates an expression)",
                    );
                    return None;
                };
                let payload = check_template(ctx, &payload)
                    .map_err(|m| self.err(&format!("{k}.payload"), m))
                    .ok()?;
                let qos = raw.qos.unwrap_or(1);
                if qos > 1 {
                    self.err(&format!("{k}.qos"), "qos must be 0 or 1: closedloop takes the broker's PUBACK (QoS 1) as the write's acknowledgement, and QoS 2's extra handshake confirms nothing more about the device");
                }
                Some(WriteEntry::Mqtt {
                    topic,
                    payload,
                    qos,
                })
            }
            SourceFamily::Node => {
                let Some(value) = raw.value else {
                    need(self, "value", "write value = \"<expression>\"");
                    return None;
                };
                let value = check(ctx, &value.0, Want::Value)
                    .map_err(|m| self.err(&format!("{k}.value"), m))
                    .ok()?;
                Some(WriteEntry::OpcuaNode {
                    node: raw.node.unwrap_or_default(),
                    value,
                })
            }
            SourceFamily::Method => {
                let Some(object) = raw.object else {
                    need(
                        self,
                        "object",
                        "write object = \"<NodeId of the object owning the method>\"",
                    );
                    return None;
                };
                let mut args = Vec::new();
                for (j, a) in raw.args.unwrap_or_default().iter().enumerate() {
                    args.push(
                        check(ctx, &a.0, Want::Value)
                            .map_err(|m| self.err(&format!("{k}.args[{j}]"), m))
                            .ok()?,
                    );
                }
                Some(WriteEntry::OpcuaMethod {
                    method: raw.method.unwrap_or_default(),
                    object,
                    args,
                })
            }
            SourceFamily::Can => {
                let Some(signals) = raw.signals.filter(|s| !s.is_empty()) else {
                    need(
                        self,
                        "signals",
                        "write signals = { NAME = \"<expression>\" }",
                    );
                    return None;
                };
                let mut out = Vec::new();
                for (name, e) in &signals {
                    out.push((
                        name.clone(),
                        check(ctx, &e.0, Want::Value)
                            .map_err(|m| self.err(&format!("{k}.signals.{name}"), m))
                            .ok()?,
                    ));
                }
                if let Some(Err(m)) = raw.cycle_ms.map(|ms| {
                    crate::limits::CYCLE_MS.check_u64(ms, "write how often the frame is re-sent while the command runs, in that range, or remove cycle_ms to send it once")
                }) {
                    self.err(&format!("{k}.cycle_ms"), m);
                    return None;
                }
                Some(WriteEntry::Can {
                    message: raw.message.map(|m| m.0).unwrap_or_default(),
                    signals: out,
                    cycle_ms: raw.cycle_ms,
                })
            }
        }
    }
}

/// The keys a write entry may have, by family.
const WRITE_KEYS: &[(SourceFamily, &[&str])] = &[
    (
        SourceFamily::Register,
        &[
            "coil",
            "discrete_input",
            "holding",
            "input",
            "type",
            "word_order",
            "byte_swap",
            "bit",
            "scale",
            "offset",
            "value",
        ],
    ),
    (SourceFamily::Topic, &["topic", "payload", "qos"]),
    (SourceFamily::Node, &["node", "value"]),
    (SourceFamily::Method, &["method", "object", "args"]),
    (SourceFamily::Can, &["message", "signals", "cycle_ms"]),
];
