//! What a person on the floor reads on the operator page, checked in the browser: one time
//! format everywhere (24-hour, with the date, in the browser's zone; the zone and UTC on hover),
//! a command's timeline in words rather than JSON, chart ticks at round values, how each device
//! reports (a poll period only for a polled one), and who is looking.

use super::Session;
use serde_json::{Value, json};

/// The one time format: `2026-12-06 14:03:07`.
const TIME: &str = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$";

/// A zone where the hour now is about 15 (`Etc/GMT-N` is UTC+N), so that a 12-hour clock ("3:…
/// PM") could not pass for the 24-hour one; and that hour.
pub fn afternoon_zone() -> (String, u64) {
    let utc_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
        % 24;
    let mut offset = (15 + 24 - utc_hour as i64) % 24;
    if offset > 14 {
        offset -= 24;
    }
    let zone = match offset {
        0 => "Etc/GMT".to_string(),
        o if o > 0 => format!("Etc/GMT-{o}"),
        o => format!("Etc/GMT+{}", -o),
    };
    (zone, ((utc_hour as i64 + offset).rem_euclid(24)) as u64)
}

/// The open command `id` as a person reads it: its times in one format in the zone and hour of
/// `when`, its timeline in words with each of `want`, its chart's ticks at round values.
pub async fn command_reads_for_people(s: &Session, id: &str, when: (&str, u64), want: &[&str]) {
    times_in_one_format(s, id, when.0, when.1).await;
    timeline_in_words(s, want).await;
    round_ticks(s).await;
}

/// The open command's times — its row in the list, its facts, every timeline entry — read
/// `YYYY-MM-DD HH:MM:SS` on a 24-hour clock in `zone` (hour `hour` or the next), with the zone
/// and the UTC time on hover; and no AM or PM anywhere on the page.
pub async fn times_in_one_format(s: &Session, id: &str, zone: &str, hour: u64) {
    let script = "const [id, re] = arguments; const rx = new RegExp(re); \
        const all = [...document.querySelectorAll(`tr[data-command-id='${id}'] time, #facts time, #timeline time`)]; \
        return {times: all.map(t => [t.textContent, t.title, t.getAttribute('datetime')]), \
          rows: document.querySelectorAll(`tr[data-command-id='${id}'] td time`).length, \
          facts: document.querySelectorAll('#facts time').length, \
          entries: document.querySelectorAll('#timeline li[data-event]').length, \
          timed: document.querySelectorAll('#timeline li[data-event] > time').length, \
          bad: all.filter(t => !rx.test(t.textContent)).map(t => t.textContent), \
          ampm: /\\b(AM|PM|am|pm)\\b/.test(document.body.innerText)};";
    let r = s.run(script, json!([id, TIME])).await;
    assert_eq!(r["bad"], json!([]), "not YYYY-MM-DD HH:MM:SS: {r}");
    assert_eq!(r["ampm"], false, "a 12-hour clock on the page: {r}");
    assert_eq!(r["rows"], 1, "the list's time: {r}");
    assert!(r["facts"].as_u64() >= Some(2), "accepted and updated: {r}");
    assert!(r["entries"].as_u64() >= Some(3), "{r}");
    assert_eq!(r["entries"], r["timed"], "every entry has its time: {r}");
    for t in r["times"].as_array().unwrap() {
        let (text, title) = (t[0].as_str().unwrap(), t[1].as_str().unwrap());
        let shown: u64 = text[11..13].parse().unwrap();
        assert!(
            shown == hour || shown == (hour + 1) % 24,
            "{text}: not {hour}h in {zone}"
        );
        let utc = t[2].as_str().unwrap();
        assert!(
            title.starts_with("local time") && title.contains("UTC"),
            "{text}: {title}"
        );
        assert!(
            title.contains(&utc[..19]),
            "{text}: the UTC time {utc} on hover: {title}"
        );
    }
}

/// The open command's timeline reads in words: no JSON in it, each of `want` in it, the raw
/// JSON only behind a closed `<details>`.
pub async fn timeline_in_words(s: &Session, want: &[&str]) -> String {
    let script = "const raw = document.querySelector('details.raw'); \
        return {text: document.getElementById('timeline').innerText, open: raw.open, \
          raw: document.getElementById('raw').textContent};";
    let r = s.run(script, json!([])).await;
    let text = r["text"].as_str().unwrap().to_string();
    for json_sign in ['{', '}', '[', '"'] {
        assert!(!text.contains(json_sign), "JSON in the timeline: {text}");
    }
    assert!(
        !text.contains("device_ack") && !text.contains("read_at"),
        "{text}"
    );
    for w in want {
        assert!(text.contains(w), "{w:?} is not in the timeline:\n{text}");
    }
    assert_eq!(r["open"], false, "the raw JSON is shown on demand only");
    let raw: Value = serde_json::from_str(r["raw"].as_str().unwrap()).expect("raw JSON");
    assert!(raw.as_array().is_some_and(|a| !a.is_empty()), "{raw}");
    text
}

/// The chart's axis ticks sit at round values (a 1, 2 or 5 × 10^k ms step from 0), each
/// labelled in the unit its step fits, with as many decimals as the step needs.
pub async fn round_ticks(s: &Session) {
    let script = "return [...document.querySelectorAll('#chart text.tick')] \
                    .map(t => [Number(t.dataset.ms), t.textContent])";
    let ticks = s.run(script, json!([])).await;
    check_ticks(ticks.as_array().unwrap());
    // The spans of the report: a 60 ms switch, a 1.3 s and a 6 s move.
    let spans = "return [62, 1300, 6000].map(s => window.chart.ticks(s).map(t => t[1]))";
    let labels = s.run(spans, json!([])).await;
    let want = json!([
        ["0 ms", "20 ms", "40 ms", "60 ms"],
        ["0.0 s", "0.5 s", "1.0 s"],
        ["0 s", "2 s", "4 s", "6 s"]
    ]);
    assert_eq!(labels, want);
}

fn check_ticks(ticks: &[Value]) {
    assert!(ticks.len() >= 3, "{ticks:?}");
    let at: Vec<f64> = ticks.iter().map(|t| t[0].as_f64().unwrap()).collect();
    let step = at[1] - at[0];
    let mantissa = step / 10f64.powf(step.log10().floor());
    let round = [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6);
    assert!(at[0] == 0.0 && round, "ticks at {at:?}");
    for (i, t) in at.iter().enumerate() {
        assert!((t - i as f64 * step).abs() < step * 1e-6, "ticks at {at:?}");
    }
    for t in ticks {
        let (ms, label) = (t[0].as_f64().unwrap(), t[1].as_str().unwrap());
        let (number, unit) = label.split_once(' ').expect(label);
        let scale = match unit {
            "ms" => 1.0,
            "s" => 1000.0,
            other => panic!("{label}: unit {other}"),
        };
        let value: f64 = number.parse().expect(label);
        assert!(
            (value * scale - ms).abs() < step * 1e-3,
            "{label} is not {ms} ms"
        );
        let decimals = number.split('.').nth(1).map_or(0, str::len);
        let needed = (-(step / scale).log10().floor()).max(0.0) as usize;
        assert_eq!(
            decimals, needed,
            "{label}: decimals for a step of {step} ms"
        );
    }
}

/// `device`'s card says how its values arrive and contains `want`; a pushed device is not
/// shown with a poll period.
pub async fn reports(s: &Session, device: &str, kind: &str, want: &str) -> String {
    let script = "const p = document.querySelector(`.device[data-device='${arguments[0]}'] p.reporting`); \
                  return p && [p.dataset.reporting, p.textContent]";
    let what = format!("how {device} reports");
    let r = s.wait_until(&what, script, json!([device])).await;
    let text = r[1].as_str().unwrap().to_string();
    assert_eq!(r[0], kind, "{device}: {text}");
    assert!(text.contains(want), "{device}: {text}");
    if kind == "pushed" {
        assert!(
            !text.contains("poll ") && !text.contains("read every"),
            "{text}"
        );
    }
    text
}

/// The header names who is looking: `want` at the start, never the transport's name.
pub async fn who(s: &Session, want: &str) -> String {
    let script = "const w = document.getElementById('who').textContent; \
                  return w.startsWith(arguments[0]) && w";
    let text = s.wait_until("who is looking", script, json!([want])).await;
    let text = text.as_str().unwrap().to_string();
    assert!(!text.contains("http"), "{text}");
    text
}
