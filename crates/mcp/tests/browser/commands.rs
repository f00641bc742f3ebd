//! The command list and one command's chart, checked in the browser as a person uses them: a
//! command appearing and charted while it runs, the reading that decided a completion drawn
//! before its verdict, a cancel from the keyboard, and the list's filters.

use super::Session;
use serde_json::{Value, json};

/// The script that answers the status the list shows for the command `arguments[0]`.
const ROW_STATUS: &str =
    "return document.querySelector(`tr[data-command-id='${arguments[0]}']`)?.dataset.status";

/// Waits for the move `id` running in the list, opens it, and waits for its chart: position
/// readings (several) and the device's acknowledgement.
pub async fn charted_while_running(s: &Session, id: &str) {
    let running = format!("{ROW_STATUS} === 'running'");
    s.wait_until("the move running in the list", &running, json!([id]))
        .await;
    s.click_css(&format!("tr[data-command-id='{id}'] button.show"))
        .await;
    let charted = "const d = document.getElementById('detail'); \
                   return !d.hidden && d.dataset.commandId === arguments[0] \
                     && !!d.querySelector(\"#chart svg polyline[data-series='position_mm']\") \
                     && !!d.querySelector(\"#chart svg line[data-mark='device_ack']\")";
    let what = "the move's chart with its readings and ack";
    s.wait_until(what, charted, json!([id])).await;
    let moved = "const p = document.querySelector(\"#chart polyline[data-series='position_mm']\"); \
                 return p.getAttribute('points').split(' ').length >= 3";
    s.wait_until("several position readings on the chart", moved, json!([]))
        .await;
}

/// Opens the completed command `id` and checks its chart against the `evidence` that decided it:
/// each criterion signal's last plotted value is the evidence's, and that reading's dot stands
/// before the verdict's marker.
pub async fn deciding_reading_charted_before_the_verdict(s: &Session, id: &str, evidence: &Value) {
    let completed = format!("{ROW_STATUS} === 'completed'");
    s.wait_until("the switch completed in the list", &completed, json!([id]))
        .await;
    s.click_css(&format!("tr[data-command-id='{id}'] button.show"))
        .await;
    let verdict = "const d = document.getElementById('detail'); \
                   return d.dataset.commandId === arguments[0] \
                     && !!d.querySelector(\"#chart line[data-mark='completed']\")";
    s.wait_until("the completed verdict on the chart", verdict, json!([id]))
        .await;
    let signals = evidence.as_object().expect("evidence");
    assert!(!signals.is_empty(), "{evidence}");
    for (name, reading) in signals {
        let chart = "const [name] = arguments; \
            const line = document.querySelector(`#chart polyline[data-series='${name}']`); \
            const dots = [...document.querySelectorAll(`#chart circle[data-series='${name}']`)]; \
            const mark = document.querySelector(\"#chart line[data-mark='completed']\"); \
            return {last: line.dataset.last, at: dots[dots.length - 1].dataset.at, \
                    dot: Number(dots[dots.length - 1].getAttribute('cx')), \
                    verdict: Number(mark.getAttribute('x1'))};";
        let drawn = s.run(chart, json!([name])).await;
        assert_eq!(
            drawn["last"],
            reading["value"].to_string(),
            "{name}: {drawn} vs {reading}"
        );
        let read_at = reading["at"].as_str().unwrap();
        let drawn_at = drawn["at"].as_str().unwrap();
        assert_eq!(
            &drawn_at[..23],
            &read_at[..23],
            "{name}: drawn at its read time"
        );
        let (dot, verdict) = (
            drawn["dot"].as_f64().unwrap(),
            drawn["verdict"].as_f64().unwrap(),
        );
        assert!(
            dot < verdict,
            "{name}: the deciding reading ({dot}) is not before the verdict ({verdict})"
        );
    }
    super::screenshot(s, "completed-chart.png", 1000).await;
}

/// Cancels `id` from the keyboard — Tab from the status filter to its row's Cancel button,
/// which shows its focus, then Enter — accepts the confirmation, and waits for `cancelled` in
/// the list and as the chart's verdict.
pub async fn cancelled_from_the_page(s: &Session, id: &str) {
    s.run("document.getElementById('f-status').focus()", json!([]))
        .await;
    let on_cancel = "const a = document.activeElement; \
                     return a.matches('button.cancel') && a.dataset.commandId === arguments[0]";
    for _ in 0..10 {
        if s.run(on_cancel, json!([id])).await == json!(true) {
            break;
        }
        s.press('\u{E004}').await;
    }
    let focus = "const a = document.activeElement; \
                 return a.matches(':focus-visible') && getComputedStyle(a).outlineStyle !== 'none' \
                   && a.dataset.commandId === arguments[0]";
    let what = "the Cancel button reached with Tab, its focus visible";
    s.wait_until(what, focus, json!([id])).await;
    s.press('\u{E007}').await;
    let asked = s.dialog_text().await;
    assert!(asked.starts_with("Cancel slide move_to"), "{asked}");
    s.accept_dialog().await;
    let cancelled = format!("{ROW_STATUS} === 'cancelled'");
    s.wait_until("the move cancelled in the list", &cancelled, json!([id]))
        .await;
    let verdict = "const d = document.getElementById('detail'); \
                   return d.dataset.status === 'cancelled' \
                     && !!d.querySelector(\"#chart line[data-mark='cancelled']\")";
    s.wait_until("the cancelled verdict on the chart", verdict, json!([]))
        .await;
}

/// The list's filters: each one that excludes the cancelled move `id` empties the list, the
/// one that matches it brings it back.
pub async fn filtered(s: &Session, id: &str) {
    let set = "const [id, value] = arguments; const f = document.getElementById(id); \
               f.value = value; f.dispatchEvent(new Event('change'));";
    let empty = "return !document.getElementById('commands-empty').hidden";
    let shown = "return document.getElementById('commands-empty').hidden && \
         document.querySelector(`tr[data-command-id='${arguments[0]}']`)?.dataset.status === 'cancelled'";
    s.run(set, json!(["f-status", "running"])).await;
    s.wait_until("no running command listed", empty, json!([]))
        .await;
    s.run(set, json!(["f-status", "cancelled"])).await;
    s.wait_until("the cancelled move listed", shown, json!([id]))
        .await;
    s.run(set, json!(["f-device", "lamp"])).await;
    s.wait_until("no cancelled lamp command listed", empty, json!([]))
        .await;
    s.run(set, json!(["f-device", ""])).await;
    s.run(set, json!(["f-status", ""])).await;
    s.wait_until("the move listed unfiltered", shown, json!([id]))
        .await;
}
