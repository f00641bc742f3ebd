//! `${env:NAME}` replaced in the parts of the document as they are read (the text before the
//! devices, each device, the alarms), each unset variable reported where it is written.
//!
//! A variable that is not set is reported at its device and key, and that key is muted so the
//! placeholder left there causes no follow-on error. Its message goes to the report's section
//! of its top-level key ([`Section::Env`]), so the report reads the same whether the devices
//! were checked one by one or the whole file at once.

use crate::env::{self, Missing, Seg};
use crate::error::{Section, Sink};

/// What a variable's message says. An MCP client starts `closedloop serve` with a reduced
/// environment (only what its config's `env` block names), so a variable set in the user's shell
/// is often unset there: the message names that block as the fix.
pub(crate) fn message(var: &str) -> String {
    format!(
        "the environment variable {var} is not set; set it before starting closedloop (an MCP \
         client passes only the variables in its config's \"env\" block: add \"{var}\": \"…\" \
         there), or write the value in the file"
    )
}

/// Replaces `${env:NAME}` in a table of top-level keys (the text before the devices, or the
/// alarms).
pub(super) fn in_table(
    doc: &mut toml::Table,
    lookup: &dyn Fn(&str) -> Option<String>,
    sink: &mut Sink,
) {
    for m in env::substitute(doc, lookup) {
        let top = match m.path.first() {
            Some(Seg::Key(k)) => k.clone(),
            _ => String::new(),
        };
        let key = render(
            String::new(),
            &m.path,
            Some(&toml::Value::Table(doc.clone())),
        );
        report(sink, Section::Env(top), None, &key, &m);
    }
}

/// Replaces `${env:NAME}` in the `index`-th device. Its messages name the device by its id when
/// it has a string one, by `device[index]` otherwise.
pub(super) fn in_device(
    index: usize,
    device: &mut toml::Value,
    lookup: &dyn Fn(&str) -> Option<String>,
    sink: &mut Sink,
) {
    for m in env::substitute_value(device, lookup) {
        let id = device.get("id").and_then(|v| v.as_str());
        let (id, key) = match id {
            Some(id) => (Some(id), render(String::new(), &m.path, Some(device))),
            None => (
                None,
                render(format!("device[{index}]"), &m.path, Some(device)),
            ),
        };
        report(sink, Section::Env("device".into()), id, &key, &m);
    }
}

fn report(sink: &mut Sink, section: Section, device: Option<&str>, key: &str, m: &Missing) {
    sink.section(section);
    sink.push(device, key, message(&m.var));
    sink.section(Section::Rest);
    sink.mute(device, key);
}

/// The key of `segs` as a person reads it (`action.switch.write[0].value`), after `key`,
/// walking from `cur`: an action's index is shown as its name.
fn render(mut key: String, segs: &[Seg], mut cur: Option<&toml::Value>) -> String {
    let mut prev_key = "";
    for s in segs {
        match s {
            Seg::Key(k) => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(k);
                prev_key = k;
                cur = cur.and_then(|v| v.get(k.as_str()));
            }
            Seg::Index(i) => {
                cur = cur.and_then(|v| v.get(*i));
                let name = cur.and_then(|v| v.get("name")).and_then(|n| n.as_str());
                match name {
                    Some(n) if prev_key == "action" => key.push_str(&format!(".{n}")),
                    _ => key.push_str(&format!("[{i}]")),
                }
            }
        }
    }
    key
}
