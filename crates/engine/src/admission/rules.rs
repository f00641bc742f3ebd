//! Admission checks shared by submission and dispatch, each a small function that either passes
//! or says in words why the command must not go to the device.

use crate::device::{DeviceRuntime, Liveness, Snapshot};
use closedloop_contract::Value;
use closedloop_plant::{Action, Expr, Scope};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Longest expected duration a command may declare: past a day it is a plant-file mistake.
const MAX_EXPECT_S: f64 = 86_400.0;

/// `expect_s` evaluated for this command, or why it is no duration (docs/architecture.md: an
/// expected duration that cannot be computed is not zero — a NaN once became a 0.12 s deadline and
/// a correct move ended `timeout` with its stop written).
pub(crate) fn expected_duration(action: &Action, scope: &Scope) -> Result<f64, String> {
    let expr = &action.expect_s;
    let why = match expr.eval_f64(scope) {
        Ok(s) if s.is_finite() && (0.0..=MAX_EXPECT_S).contains(&s) => return Ok(s),
        Ok(s) if s.is_nan() => "is not a number".to_string(),
        Ok(s) if s < 0.0 => format!("came to {s}, a negative duration"),
        Ok(s) => format!("came to {s}, longer than a day"),
        Err(e) => format!("cannot be computed ({e})"),
    };
    Err(format!(
        "expect_s `{}` {why}{}; nothing was written. Fix the parameters (or the plant file's expect_s).",
        expr.source(),
        values_read(expr, scope)
    ))
}

/// The values an expression reads, for a detail text: ` with target_mm = 12, position_mm = 12`.
pub(crate) fn values_read(expr: &Expr, scope: &Scope) -> String {
    let params = expr.params().iter().filter_map(|p| {
        let v = scope.params.get(p)?;
        Some(format!("params.{p} = {}", serde_json::to_value(v).ok()?))
    });
    let signals = expr.signals().iter().map(|s| match scope.signals.get(s) {
        Some(v) => format!("{s} = {v}"),
        None => format!("{s} has no value yet"),
    });
    let devices =
        expr.devices()
            .iter()
            .map(|(d, s)| match scope.devices.get(d).and_then(|m| m.get(s)) {
                Some(v) => format!("{} = {v}", closedloop_plant::other_device_name(d, s)),
                None => format!(
                    "{} has no value yet",
                    closedloop_plant::other_device_name(d, s)
                ),
            });
    let all: Vec<String> = params.chain(signals).chain(devices).collect();
    if all.is_empty() {
        String::new()
    } else {
        format!(" with {}", all.join(", "))
    }
}

/// The liveness as a word for texts.
pub(crate) fn liveness_word(l: Liveness) -> &'static str {
    match l {
        Liveness::Online => "online",
        Liveness::Offline => "offline",
        Liveness::Unknown => "unknown (no answer since start)",
    }
}

/// Every device's values for `requires`, with the devices it names read now: a cached value
/// may predate a fault, and a device that is offline or does not answer decides nothing
/// (docs/architecture.md, every device an expression reads is held to the same fence), nor does
/// a signal it names that cannot be read or was read too long ago (`sample::Freshness`). `Err`:
/// why, in words that name the device or the signal. Devices that report on their own (MQTT)
/// cannot be asked: their latest values count while they are online.
pub(crate) async fn required_values(
    action: &Action,
    devices: &BTreeMap<String, Arc<DeviceRuntime>>,
    mut scope: BTreeMap<String, BTreeMap<String, Value>>,
    clock: &crate::clock::Clock,
) -> Result<BTreeMap<String, BTreeMap<String, Value>>, String> {
    let Some(req) = &action.requires else {
        return Ok(scope);
    };
    let mut named: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (d, s) in req.devices() {
        named.entry(d).or_default().push(s);
    }
    for (d, signals) in named {
        let Some(dev) = devices.get(d) else {
            continue;
        };
        let within = Duration::from_millis(dev.spec.request_timeout_ms());
        let after = dev.issued_seq();
        let snap = dev.fresh(within).await;
        let now_ms = clock.now_ms();
        if let Some(why) = not_judgeable(dev, &snap, &signals, after, within, now_ms) {
            return Err(format!(
                "The precondition `{}` cannot be judged: {why}; nothing was written.",
                req.source()
            ));
        }
        scope.insert(d.clone(), dev.usable_values(&snap, now_ms));
    }
    Ok(scope)
}

/// Why `signals` of `dev`, read in `snap` after the read numbered `after` was asked for, cannot
/// decide a precondition, naming the device or the first such signal; `None` when they can.
fn not_judgeable(
    dev: &DeviceRuntime,
    snap: &Snapshot,
    signals: &[&String],
    after: u64,
    within: Duration,
    now_ms: i64,
) -> Option<String> {
    let d = dev.id();
    if snap.liveness != Liveness::Online {
        return Some(format!(
            "{d} is {} ({})",
            liveness_word(snap.liveness),
            crate::device::offline_detail(dev, snap).trim_end_matches('.')
        ));
    }
    let rule = dev.freshness(now_ms);
    if let Some((s, unusable)) = signals
        .iter()
        .find_map(|s| Some((s, snap.usable(s, rule).err()?)))
    {
        return Some(unusable.describe(
            &closedloop_plant::other_device_name(d, s),
            now_ms,
            crate::clock::rfc3339,
        ));
    }
    let stale: Vec<&str> = signals
        .iter()
        .filter(|s| dev.can_be_asked() && snap.read_after(s, after).is_none())
        .map(|s| s.as_str())
        .collect();
    (!stale.is_empty()).then(|| {
        format!(
            "{d} gave no fresh value of {} within {} ms",
            stale.join(", "),
            within.as_millis()
        )
    })
}

/// The first `fail_when` that already holds: a latched fault is not a new failure, and writing
/// to a faulted device would only "fail" again (docs/architecture.md).
pub(crate) fn failure_already_on(action: &Action, scope: &Scope) -> Option<String> {
    let (code, expr) = action
        .fail_when
        .iter()
        .find(|(_, e)| e.eval_bool(scope).unwrap_or(false))?;
    Some(format!(
        "the failure condition {code} (`{}`) already holds{}; nothing was written. Clear the fault first (a reset action, or a person at the device)",
        expr.source(),
        values_read(expr, scope)
    ))
}

/// How long to wait before this action may run again when an operation-rate limit — its own
/// or its device's — is spent (`None`: it may run now), with the detail naming the limit.
/// Counted from the journal, so a restart does not reset the budget.
pub(crate) async fn rate_wait(
    ctx: &crate::context::Context,
    device: &closedloop_plant::Device,
    action: &Action,
) -> Result<Option<(f64, String)>, crate::EngineError> {
    let now_ms = ctx.clock.now_ms();
    let limits = [
        (
            action.max_rate.as_ref(),
            Some(action.name.as_str()),
            "the action",
        ),
        (device.max_rate.as_ref(), None, "the device"),
    ];
    let mut longest: Option<(f64, String)> = None;
    for (limit, only, whose) in limits {
        let Some(limit) = limit else { continue };
        let since = now_ms - (limit.horizon_s() * 1000.0).ceil() as i64;
        let done: Vec<f64> = ctx
            .journal
            .accepted_since(&device.id, only, since)
            .await?
            .into_iter()
            .map(|ms| (ms - since) as f64 / 1000.0)
            .collect();
        let now = (now_ms - since) as f64 / 1000.0;
        if let Some(wait) = limit.wait_s(&done, now)
            && longest.as_ref().is_none_or(|(w, _)| wait > *w)
        {
            let detail = format!(
                "{whose}'s max_rate = \"{}\" (max_burst {}) is spent for {} {}; it may run again in {:.1} s; nothing was written",
                limit.text, limit.burst, device.id, action.name, wait
            );
            longest = Some((wait, detail));
        }
    }
    Ok(longest)
}
