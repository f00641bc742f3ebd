//! Loading a plant as it grows: parse and validate 250, 1,000 and 8,000 relays (each with a
//! switch action whose `done_when` is dry-run), and one with a cross-device `requires` on every
//! relay. Linear loading shows as a constant time per device across the sizes; the figures go
//! in the issue's table. Run: `cargo bench -p closedloop-plant --bench load`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;

/// `n` relays; with `requires`, each one's switch needs its neighbour's contact open.
fn relays(n: usize, requires: bool) -> String {
    let mut out = String::from("[server]\nname = \"hall\"\njournal = \"sqlite::memory:\"\n");
    for i in 0..n {
        let req = if requires && i > 0 {
            format!("requires = \"!devices.relay{}.contact\"\n", i - 1)
        } else {
            String::new()
        };
        out.push_str(&format!(
            r#"
[[device]]
id = "relay{i}"
description = "Relay {i}"
driver = {{ kind = "sim", model = "relay" }}
poll_ms = 100
[device.signals]
commanded = {{ coil = 0 }}
contact   = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch relay {i}."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.02
{req}"#
        ));
    }
    out
}

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("plant/load");
    group.sample_size(10);
    for (n, requires) in [(250, false), (1_000, false), (8_000, false), (1_000, true)] {
        let src = relays(n, requires);
        let label = if requires {
            "relays+requires"
        } else {
            "relays"
        };
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new(label, n), &src, |b, src| {
            b.iter(|| {
                closedloop_plant::parse(black_box(src), "hall.toml", Path::new("."))
                    .expect("the plant loads")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
