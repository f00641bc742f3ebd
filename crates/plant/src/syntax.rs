//! Where a TOML syntax error is, in plant-file terms: line, column, device and key.
//!
//! A document that does not parse has no tree to ask, so the source is scanned: the last
//! `[[device]]` header before the error and the `id = "..."` under it name the device; the
//! table header and the key on the error's line name the key. Duplicate keys (a signal or an
//! action key given twice) are reported by TOML as syntax errors, so this matters.

/// Device id, key path (relative to the device when inside one), line and column (1-based).
pub(crate) struct Where {
    pub device: Option<String>,
    pub key: Option<String>,
    pub line: (usize, usize),
}

/// Locates the error at byte `offset` of `src`; `span_text` is the text the error points at.
pub(crate) fn locate(src: &str, offset: usize, span_text: &str, duplicate: bool) -> Where {
    let offset = offset.min(src.len());
    let before = &src[..offset];
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    let lines: Vec<&str> = src.lines().collect();
    let err_line = line_no - 1;

    // The innermost table header above the error, and the last [[device]] header.
    let mut header: Option<String> = None;
    let mut device_start: Option<usize> = None;
    for (i, l) in lines.iter().enumerate().take(err_line + 1) {
        let t = l.trim();
        if let Some(h) = header_name(t) {
            if h == "device" && t.starts_with("[[") {
                device_start = Some(i);
            } else if !h.starts_with("device.") && h != "device" {
                device_start = None;
            }
            header = Some(h);
        }
    }
    let device = device_start.and_then(|start| {
        lines
            .iter()
            .skip(start + 1)
            .take_while(|l| header_name(l.trim()).is_none_or(|h| h.starts_with("device.")))
            .find_map(|l| id_value(l.trim()))
    });
    let table = header.unwrap_or_default();
    let rel = if device_start.is_some() {
        table
            .strip_prefix("device")
            .map(|r| r.trim_start_matches('.'))
            .unwrap_or(&table)
            .to_string()
    } else {
        table
    };
    let key_here = if duplicate {
        Some(span_text.trim().trim_matches(['"', '\'']).to_string())
    } else {
        lines
            .get(err_line)
            .and_then(|l| l.split_once('='))
            .map(|(k, _)| k.trim().to_string())
    };
    let key = match key_here.filter(|k| !k.is_empty() && !k.starts_with('[')) {
        Some(k) if rel.is_empty() => Some(k),
        Some(k) => Some(format!("{rel}.{k}")),
        None if rel.is_empty() => None,
        None => Some(rel),
    };
    Where {
        device,
        key,
        line: (line_no, col),
    }
}

/// `device.signals` for `[device.signals]`, `device` for `[[device]]`.
fn header_name(line: &str) -> Option<String> {
    let inner = line.strip_prefix("[[").and_then(|l| l.split("]]").next());
    let inner = inner.or_else(|| line.strip_prefix('[').and_then(|l| l.split(']').next()))?;
    Some(
        inner
            .split('.')
            .map(|p| p.trim().trim_matches('"'))
            .collect::<Vec<_>>()
            .join("."),
    )
}

fn id_value(line: &str) -> Option<String> {
    let (k, v) = line.split_once('=')?;
    if k.trim() != "id" {
        return None;
    }
    let v = v.trim();
    let q = v.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    v[1..].split(q).next().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_signal_names_device_and_key() {
        let src = "[[device]]\nid = \"lamp\"\n[device.signals]\ncontact = { coil = 0 }\ncontact = { coil = 1 }\n";
        let offset = src.rfind("contact").unwrap();
        let w = locate(src, offset, "contact", true);
        assert_eq!(w.device.as_deref(), Some("lamp"));
        assert_eq!(w.key.as_deref(), Some("signals.contact"));
        assert_eq!(w.line, (5, 1));
    }

    #[test]
    fn error_outside_devices_names_the_key() {
        let src = "[server]\nname = workshop\n";
        let w = locate(src, src.find("workshop").unwrap(), "workshop", false);
        assert_eq!(w.device, None);
        assert_eq!(w.key.as_deref(), Some("server.name"));
        assert_eq!(w.line, (2, 8));
    }
}
