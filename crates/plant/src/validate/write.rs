//! Write and cancel plans: each entry's kind, its fit with the driver, and its values.

use super::action::ActionCheck;
use super::exprs::{ExprCtx, Want, check_template};
use super::register::{RegKeys, SourceFamily, family};
use crate::action::WriteEntry;
use crate::model::{RawWrite, typed_ref};
use closedloop_contract::Area;

impl ActionCheck<'_> {
    pub(super) fn plan(
        &mut self,
        key: &str,
        entries: &[toml::Value],
        ctx: &ExprCtx,
    ) -> Vec<WriteEntry> {
        let mut out = Vec::with_capacity(entries.len());
        for (i, v) in entries.iter().enumerate() {
            let k = format!("{key}[{i}]");
            let keys: Vec<String> = v
                .as_table()
                .map(|t| t.keys().cloned().collect())
                .unwrap_or_default();
            let full = format!("{}.{k}", self.key);
            let raw = match typed_ref::<RawWrite>(v, &full) {
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

    /// One entry: its family (from its address key) must fit the driver; then the family's
    /// own checker types its values.
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
        match fam {
            SourceFamily::Register => self.register_write(k, raw, ctx),
            SourceFamily::Topic => self.mqtt_write(k, raw, ctx),
            SourceFamily::Node => self.node_write(k, raw, ctx),
            SourceFamily::Method => self.method_write(k, raw, ctx),
            SourceFamily::Can => self.can_write(k, raw, ctx),
        }
    }

    /// Reports a missing key of entry `k`: `what` says how to write it.
    fn missing(&mut self, k: &str, field: &str, what: &str) {
        self.err(&format!("{k}.{field}"), format!("missing {field}; {what}"));
    }

    /// A register write: only writable areas, never a single bit (it would clobber the
    /// others), and a value of the area's kind.
    fn register_write(&mut self, k: &str, raw: RawWrite, ctx: &ExprCtx) -> Option<WriteEntry> {
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
            self.missing(k, "value", "write value = \"<expression>\"");
            return None;
        };
        let want = if area == Area::Coil {
            Want::Bool
        } else {
            Want::Value
        };
        let value = self.expr(ctx, &format!("{k}.value"), Some(&value), want)?;
        Some(WriteEntry::Register {
            area,
            address,
            encoding,
            value,
        })
    }

    /// An MQTT publish: one concrete topic, a payload template, and a QoS whose PUBACK can
    /// stand for the acknowledgement.
    fn mqtt_write(&mut self, k: &str, raw: RawWrite, ctx: &ExprCtx) -> Option<WriteEntry> {
        let topic = raw.topic.unwrap_or_default();
        if topic.is_empty() || topic.contains(['+', '#']) {
            self.err(
                &format!("{k}.topic"),
                "write to one concrete topic (no empty topic, no + or # wildcards)",
            );
        }
        let Some(payload) = raw.payload else {
            self.missing(
                k,
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

    /// An OPC UA node write: the node and a value to write to it.
    fn node_write(&mut self, k: &str, raw: RawWrite, ctx: &ExprCtx) -> Option<WriteEntry> {
        let Some(value) = raw.value else {
            self.missing(k, "value", "write value = \"<expression>\"");
            return None;
        };
        let value = self.expr(ctx, &format!("{k}.value"), Some(&value), Want::Value)?;
        Some(WriteEntry::OpcuaNode {
            node: raw.node.unwrap_or_default(),
            value,
        })
    }

    /// An OPC UA method call: the object that owns the method, and its arguments.
    fn method_write(&mut self, k: &str, raw: RawWrite, ctx: &ExprCtx) -> Option<WriteEntry> {
        let Some(object) = raw.object else {
            self.missing(
                k,
                "object",
                "write object = \"<NodeId of the object owning the method>\"",
            );
            return None;
        };
        let mut args = Vec::new();
        for (j, a) in raw.args.unwrap_or_default().iter().enumerate() {
            args.push(self.expr(ctx, &format!("{k}.args[{j}]"), Some(a), Want::Value)?);
        }
        Some(WriteEntry::OpcuaMethod {
            method: raw.method.unwrap_or_default(),
            object,
            args,
        })
    }

    /// A CAN frame: at least one signal to encode, and a re-send period within its limits.
    fn can_write(&mut self, k: &str, raw: RawWrite, ctx: &ExprCtx) -> Option<WriteEntry> {
        let Some(signals) = raw.signals.filter(|s| !s.is_empty()) else {
            self.missing(k, "signals", "write signals = { NAME = \"<expression>\" }");
            return None;
        };
        let mut out = Vec::new();
        for (name, e) in &signals {
            let value = self.expr(ctx, &format!("{k}.signals.{name}"), Some(e), Want::Value)?;
            out.push((name.clone(), value));
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
