//! Latency figures, a progress bar on stderr, and the table the bench prints.

use std::io::Write as _;
use std::time::Duration;

/// Latencies of one measured call, sorted.
#[derive(Debug, Clone)]
pub struct Latencies {
    sorted: Vec<Duration>,
    /// Wall time of the whole run (for a rate).
    pub total: Duration,
}

impl Latencies {
    /// From the samples of one run and its wall time.
    pub fn new(mut samples: Vec<Duration>, total: Duration) -> Latencies {
        samples.sort();
        Latencies {
            sorted: samples,
            total,
        }
    }

    /// The `q` quantile (0..=1), nearest rank.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((self.sorted.len() as f64) * q).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    /// Median.
    pub fn p50(&self) -> Duration {
        self.quantile(0.5)
    }

    /// 99th percentile.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    /// Calls per second over the run's wall time.
    pub fn per_second(&self) -> f64 {
        self.sorted.len() as f64 / self.total.as_secs_f64().max(1e-9)
    }
}

/// Milliseconds: three decimals below one, two above.
pub fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    // A read is a tenth of a millisecond: two decimals would round its ratio's parts by 7 %.
    match ms < 1.0 {
        true => format!("{ms:.3} ms"),
        false => format!("{ms:.2} ms"),
    }
}

/// A one-line progress bar on stderr, redrawn in place; silent when stderr is not a terminal's
/// (`\r` would litter a log file).
pub struct Progress {
    label: String,
    total: usize,
    shown: usize,
    done: usize,
    tty: bool,
}

impl Progress {
    /// A bar for `total` steps of `label`.
    pub fn new(label: &str, total: usize) -> Progress {
        use std::io::IsTerminal;
        let tty = std::io::stderr().is_terminal();
        if !tty {
            eprintln!("bench: {label}");
        }
        Progress {
            label: label.to_string(),
            total: total.max(1),
            shown: usize::MAX,
            done: 0,
            tty,
        }
    }

    /// Step `done` of the total is done.
    pub fn set(&mut self, done: usize) {
        const WIDTH: usize = 30;
        let filled = (done.min(self.total) * WIDTH) / self.total;
        if !self.tty || filled == self.shown {
            return;
        }
        self.shown = filled;
        let bar: String = "#".repeat(filled) + &".".repeat(WIDTH - filled);
        eprint!("\r[{bar}] {}", self.label);
        let _ = std::io::stderr().flush();
    }

    /// One more step is done (for steps finished by several tasks in any order).
    pub fn step(&mut self) {
        self.done += 1;
        self.set(self.done);
    }

    /// Clears the bar.
    pub fn finish(self) {
        if self.tty {
            eprint!("\r{}\r", " ".repeat(self.label.len() + 34));
            let _ = std::io::stderr().flush();
        }
    }
}

/// A table with a header row, printed with aligned columns in Markdown syntax (it pastes into a
/// README as it is).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(cols) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c}{}", " ".repeat(width[i] - c.chars().count())))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    out.push_str(&line(width.iter().map(|w| "-".repeat(*w)).collect()));
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let l = Latencies::new(
            (1..=100).map(Duration::from_millis).collect(),
            Duration::from_secs(1),
        );
        assert_eq!(l.p50(), Duration::from_millis(50));
        assert_eq!(l.p99(), Duration::from_millis(99));
        assert_eq!(l.per_second(), 100.0);
        let empty = Latencies::new(vec![], Duration::from_secs(1));
        assert_eq!(empty.p99(), Duration::ZERO);
    }

    #[test]
    fn tables_align_their_columns() {
        let t = table(&["a", "bb"], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t, "| a    | bb |\n| ---- | -- |\n| long | x  |\n");
    }
}
