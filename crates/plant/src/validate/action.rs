//! `[[device.action]]`: name, params and criteria (write and cancel plans are in `write.rs`,
//! the rules between keys in `rules.rs`).

use super::Dev;
use super::device::Pending;
use super::exprs::{Catalog, ExprCtx, Want, check, check_name};
use crate::action::Action;
use crate::error::Sink;
use crate::model::{RawAction, RawExpr, RawParam, typed};
use crate::params::{ParamSpec, ParamType};
use crate::plant::DriverConfig;
use crate::schema::MAX_TOOL_NAME;
use std::collections::BTreeMap;

pub(crate) fn actions(p: &mut Pending, catalog: &Catalog, sink: &mut Sink) -> Vec<Action> {
    let own = p.signal_kinds();
    let own = &own;
    let device = p.label.clone().unwrap_or_default();
    let values = std::mem::take(&mut p.actions);
    // Sized to the tables given: a vector grown by pushes holds room for four, and a hall's
    // single-action devices would keep three empty actions each (12 MB of 8,000 relays).
    let mut out: Vec<Action> = Vec::with_capacity(values.len());
    for (i, value) in values.into_iter().enumerate() {
        let name = value
            .get("name")
            .and_then(|n| n.as_str())
            .map(str::to_string);
        let key = match &name {
            Some(n) => format!("action.{n}"),
            None => format!("action[{i}]"),
        };
        let Ok(raw) = typed::<RawAction>(value, &key).map_err(|(k, m)| p.dev.err(sink, &k, m))
        else {
            continue;
        };
        if out.iter().any(|a| a.name == raw.name) {
            p.dev.err(sink, &format!("{key}.name"), format!("the action \"{}\" is declared twice in this device; give each action its own name", raw.name));
        }
        let mut a = ActionCheck {
            dev: &p.dev,
            sink,
            key: key.clone(),
            driver: p.driver.as_ref(),
        };
        if let Some(action) = a.action(raw, &device, own, catalog) {
            out.push(action);
        }
    }
    out
}

/// Checks one action, reporting into the device's errors under `key` (`action.<name>`).
pub(super) struct ActionCheck<'a> {
    pub dev: &'a Dev,
    pub sink: &'a mut Sink,
    pub key: String,
    pub driver: Option<&'a DriverConfig>,
}

impl ActionCheck<'_> {
    pub(super) fn err(&mut self, key: &str, msg: impl Into<String>) {
        self.dev.err(self.sink, &format!("{}.{key}", self.key), msg);
    }

    /// Checks one action: its name, params, expressions and plans, then the rules between
    /// them; None when anything in it was refused.
    fn action(
        &mut self,
        mut raw: RawAction,
        device: &str,
        own: &BTreeMap<String, Option<bool>>,
        catalog: &Catalog,
    ) -> Option<Action> {
        let before = self.sink.count();
        let tool_name = self.name(&raw.name, device);
        let params = self.params(std::mem::take(&mut raw.params));
        let ctx = ExprCtx {
            device,
            action: &raw.name,
            own,
            catalog,
            params: &params,
        };
        let requires = self.expr(&ctx, "requires", raw.requires.as_ref(), Want::Bool);
        let done_when = self.expr(&ctx, "done_when", raw.done_when.as_ref(), Want::Bool);
        let started_when = self.expr(&ctx, "started_when", raw.started_when.as_ref(), Want::Bool);
        let stopped_when = self.expr(&ctx, "stopped_when", raw.stopped_when.as_ref(), Want::Bool);
        let fail_when = self.fail_when(&ctx, &raw.fail_when);
        let expect_src = raw.expect_s.clone().unwrap_or(RawExpr("0".into()));
        let expect_s = self.expr(&ctx, "expect_s", Some(&expect_src), Want::Number);
        let write = self.plan("write", &raw.write, &ctx);
        let cancel = self.plan("cancel", &raw.cancel, &ctx);
        self.plan_rules(&raw, stopped_when.is_some());
        let verification = raw.verification.unwrap_or_default();
        self.verification_rules(&raw, verification, done_when.as_ref(), &write);
        let timing = self.timing(&raw, expect_s.as_ref());
        let exclusive = self.exclusive(raw.exclusive.take(), device);
        let max_rate = self.max_rate(&raw);
        let keepalive_s = self.keepalive(&raw);
        let examples = self.examples(raw.examples.take());
        let checklist = self.checklist(raw.checklist.take(), raw.confirm == Some(true));
        if self.sink.count() > before {
            return None;
        }
        Some(Action {
            name: raw.name,
            readback_only: None,
            description: raw.description,
            params,
            requires,
            write,
            done_when,
            fail_when,
            expect_s: expect_s?,
            cancel,
            stopped_when,
            started_when,
            hold_ms: timing.hold_ms,
            idempotent: raw.idempotent.unwrap_or(false),
            verification,
            confirm: raw.confirm.unwrap_or(false),
            checklist,
            queue: raw.queue.unwrap_or(true),
            timeout_factor: timing.timeout_factor,
            timeout_floor_ms: timing.timeout_floor_ms,
            queue_timeout_s: timing.queue_timeout_s,
            exclusive,
            destructive: raw.destructive.unwrap_or(true),
            tool_name,
            max_rate,
            keepalive_s,
            examples,
            task: raw.task.unwrap_or_default(),
        })
    }

    /// Checks the action's name and returns its tool name (`<device>_<action>`), which MCP
    /// clients accept only in lower case and up to [`MAX_TOOL_NAME`] characters.
    fn name(&mut self, name: &str, device: &str) -> String {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            self.err(
                "name",
                format!(
                    "\"{name}\" is not a valid action name; use lower-case letters, digits and _"
                ),
            );
        }
        let tool_name = format!("{device}_{name}");
        if tool_name.len() > MAX_TOOL_NAME {
            self.err("name", format!("the tool name \"{tool_name}\" is longer than {MAX_TOOL_NAME} characters; shorten the device id or the action name"));
        }
        tool_name
    }

    /// An action must write something, and `stopped_when` (`stopped`: it is given) only
    /// means something after a cancel plan.
    fn plan_rules(&mut self, raw: &RawAction, stopped: bool) {
        if raw.write.is_empty() {
            self.err("write", "an action must write something; add write = [{ coil = 0, value = \"true\" }] or similar");
        }
        if stopped && raw.cancel.is_empty() {
            self.err("stopped_when", "stopped_when only applies after a cancel plan; add cancel = [...] or remove stopped_when");
        }
    }

    /// The action's exclusive group (default: the device id), which must not be empty.
    fn exclusive(&mut self, exclusive: Option<String>, device: &str) -> String {
        if exclusive.as_deref() == Some("") {
            self.err(
                "exclusive",
                "exclusive must name a group (default: the device id)",
            );
        }
        exclusive.unwrap_or_else(|| device.to_string())
    }

    /// The action's `max_rate` (with `max_burst`); a burst without a rate is reported, since
    /// it would limit nothing.
    fn max_rate(&mut self, raw: &RawAction) -> Option<crate::RateLimit> {
        match raw.max_rate.as_deref() {
            Some(text) => crate::RateLimit::parse(text, raw.max_burst)
                .map_err(|m| self.err("max_rate", m))
                .ok(),
            None if raw.max_burst.is_some() => {
                self.err(
                    "max_burst",
                    "max_burst needs a max_rate (like max_rate = \"6/min\")",
                );
                None
            }
            None => None,
        }
    }

    /// The dead-man period: within its range, and only with a cancel plan that can stop the
    /// motion when the caller stops renewing.
    fn keepalive(&mut self, raw: &RawAction) -> Option<f64> {
        let keepalive_s = raw.keepalive_s;
        if let Some(k) = keepalive_s {
            if !(k.is_finite() && (0.1..=3600.0).contains(&k)) {
                self.err("keepalive_s", format!(
                    "keepalive_s = {k} is outside 0.1 to 3600 s; write how long the action may run without its caller asking about it"
                ));
            } else if raw.cancel.is_empty() {
                self.err("keepalive_s", "keepalive_s needs a cancel plan: when the caller stops renewing, the stop in cancel is what ends the motion; add cancel (and stopped_when)");
            }
        }
        keepalive_s
    }

    /// `examples`: each a request in words, so that `closedloop lint --examples` has something
    /// to rank the tools for (an empty one would rank nothing and prove nothing).
    fn examples(&mut self, examples: Option<Vec<String>>) -> Vec<String> {
        let examples = examples.unwrap_or_default();
        for (i, e) in examples.iter().enumerate() {
            if !e.chars().any(char::is_alphanumeric) {
                self.err(&format!("examples[{i}]"), format!(
                    "example {e:?} has no words; write a request a person would make for this action, like \"turn on the desk lamp\", or remove it"
                ));
            }
        }
        examples
    }

    /// `fail_when = { CODE = "expr" }`: codes in capitals, none of the contract's own.
    fn fail_when(
        &mut self,
        ctx: &ExprCtx,
        raw: &BTreeMap<String, RawExpr>,
    ) -> Vec<(String, crate::expr::Expr)> {
        let mut fail_when = Vec::new();
        for (code, e) in raw {
            let k = format!("fail_when.{code}");
            let valid = code.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && code
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !valid {
                self.err(&k, format!("\"{code}\" is not an error code; write it in capitals like MOTOR_STALL ([A-Z][A-Z0-9_]*)"));
            } else if closedloop_contract::ErrorCode::is_reserved(code) {
                self.err(&k, format!("{code} is an error code closedloop itself reports; name this failure after its cause, e.g. MOTOR_STALL"));
            }
            if let Some(x) = self.expr(ctx, &k, Some(e), Want::Bool) {
                fail_when.push((code.clone(), x));
            }
        }
        fail_when
    }

    /// Checks one expression at `key` (nothing when it is not given), reporting a refusal
    /// there: every expression key of an action and of its write entries goes through it.
    pub(super) fn expr(
        &mut self,
        ctx: &ExprCtx,
        key: &str,
        raw: Option<&RawExpr>,
        want: Want,
    ) -> Option<crate::expr::Expr> {
        check(ctx, &raw?.0, want).map_err(|m| self.err(key, m)).ok()
    }

    fn params(&mut self, raw: BTreeMap<String, RawParam>) -> Vec<ParamSpec> {
        let mut out = Vec::with_capacity(raw.len());
        for (name, p) in raw {
            let k = format!("params.{name}");
            if let Err(m) = check_name(&name) {
                self.err(&k, format!("\"{name}\" cannot be a parameter name: {m}"));
            } else if name == "wait_s" || name == "idempotency_key" {
                self.err(&k, format!("\"{name}\" is a parameter every action tool already has; choose another name"));
            }
            let numeric = matches!(p.ty, ParamType::Number | ParamType::Integer);
            if !numeric && (p.min.is_some() || p.max.is_some()) {
                self.err(
                    &k,
                    format!(
                        "min and max apply to number and integer params, not to {}; remove them",
                        p.ty.key()
                    ),
                );
            }
            if p.choices.is_some() && p.ty != ParamType::String {
                self.err(
                    &format!("{k}.enum"),
                    "enum applies to string params; set type = \"string\" or remove enum",
                );
            }
            if p.choices.as_ref().is_some_and(Vec::is_empty) {
                self.err(
                    &format!("{k}.enum"),
                    "enum must list at least one allowed string",
                );
            }
            if let (Some(a), Some(b)) = (p.min, p.max)
                && a > b
            {
                self.err(&k, format!("min {a} is above max {b}; swap them"));
            }
            if p.min.is_some_and(|v| !v.is_finite()) || p.max.is_some_and(|v| !v.is_finite()) {
                self.err(&k, "min and max must be finite numbers");
            }
            out.push(ParamSpec {
                name,
                ty: p.ty,
                min: p.min,
                max: p.max,
                unit: p.unit,
                description: p.description,
                choices: p.choices,
                ask: self.question(&k, p.ask),
            });
        }
        out
    }

    /// A param's `ask`: the question a person sees, so it must say something (at most 500
    /// characters, one form's title).
    fn question(&mut self, key: &str, ask: Option<String>) -> Option<String> {
        let q = ask?.trim().to_string();
        if q.is_empty() || q.chars().count() > 500 {
            let why = "ask must be the question a person answers (1 to 500 characters), e.g. ask = \"Who signs this batch?\"";
            self.err(&format!("{key}.ask"), why);
            return None;
        }
        Some(q)
    }

    /// The action's `checklist`: 1 to 10 items of 1 to 300 characters, on a `confirm = true`
    /// action (the items are what its person checks before saying yes).
    fn checklist(&mut self, items: Option<Vec<String>>, confirm: bool) -> Vec<String> {
        let Some(items) = items else {
            return Vec::new();
        };
        if !confirm {
            self.err("checklist", "a checklist is what a person checks before confirming; add confirm = true or remove checklist");
        }
        if items.is_empty() || items.len() > 10 {
            self.err("checklist", "checklist must list 1 to 10 things the person checks, e.g. checklist = [\"the guard is closed\"]");
        }
        for (i, item) in items.iter().enumerate() {
            let n = item.trim().chars().count();
            if n == 0 || n > 300 {
                self.err(
                    &format!("checklist[{i}]"),
                    "each checklist item must say what to check (1 to 300 characters)",
                );
            }
        }
        items.into_iter().map(|i| i.trim().to_string()).collect()
    }
}
