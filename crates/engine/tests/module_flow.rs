//! The engine's modules import each other one way only — readings (`device`) → deciders
//! (admission, the judge, the alarms) → views and the API (`views/devices`, `ownership/rounds`,
//! `engine`) — with no loop among them (issue 43 broke the loops around `context`: the alarm
//! board and the owners' values are leaves it holds, their tasks and views import it). This
//! reads every source file of the crate, takes the `crate::a::b` paths and `super::a` uses each
//! names outside its tests, each as the deepest module it reaches (`crate::dispatch::plan::X` is
//! `dispatch/plan`), and fails naming the modules of any loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module (its file's path under `src`, without `.rs`) and the modules it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let rel = path.strip_prefix(&src).unwrap().with_extension("");
            let name = rel.to_string_lossy().replace('\\', "/");
            if name.starts_with("machine_tests") || name.ends_with("tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("mod tests {").next().unwrap_or_default();
            let parent = name.rsplit_once('/').map_or("", |(p, _)| p).to_string();
            let paths = named(code, &parent);
            out.insert(name, paths);
        }
    }
    // A path names the deepest module it reaches: `crate::dispatch::plan::Request` is the
    // module `dispatch/plan`, `crate::supervision::Supervisor` the module `supervision`.
    let known: BTreeSet<String> = out.keys().cloned().collect();
    for (name, deps) in out.iter_mut() {
        let resolved = deps.iter().filter_map(|path| deepest(path, &known));
        *deps = resolved.filter(|d| d != name).collect();
    }
    out
}

/// The deepest known module along `path` (`dispatch/plan/Request` → `dispatch/plan`).
fn deepest(path: &str, known: &BTreeSet<String>) -> Option<String> {
    let segments: Vec<&str> = path.split('/').collect();
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("/"))
        .find(|m| known.contains(m))
}

/// The module paths `code` names as `crate::a::b` or `use super::a` (from a module whose
/// parent is `parent`), as `a/b`, comments left out.
fn named(code: &str, parent: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (marker, base) in [("crate::", ""), ("use super::", parent)] {
            let mut rest = line;
            while let Some(at) = rest.find(marker) {
                rest = &rest[at + marker.len()..];
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let path = path.trim_end_matches(':').replace("::", "/");
                out.insert(match base {
                    "" => path,
                    b => format!("{b}/{path}"),
                });
            }
        }
    }
    out
}

/// A loop through `start`, if the graph has one (depth-first, the path kept).
fn loop_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in &graph[&at] {
            if next == start {
                return Some(path.clone());
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

#[test]
fn the_engines_modules_import_each_other_one_way_only() {
    let graph = imports();
    assert!(
        graph.len() > 30,
        "the engine's sources were not found: {graph:?}"
    );
    assert!(
        graph["context"].contains("alarms"),
        "the reader lost its way: {graph:?}"
    );
    let loops: Vec<Vec<String>> = graph.keys().filter_map(|m| loop_from(&graph, m)).collect();
    assert!(
        loops.is_empty(),
        "modules that import each other in a loop: {loops:?}"
    );
}
