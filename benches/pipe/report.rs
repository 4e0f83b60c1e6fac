//! The figures of a run: a table of rows (a figure per round per subject), printed as Markdown
//! with each subject's median and its ratio to the ceiling of the same round, and the targets
//! of issues 5 and 13, and of the comparison with peers, each with the figure that decides it.

/// Whether a bigger or a smaller figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Better {
    Higher,
    Lower,
}

impl Better {
    /// Whether figure `a` is better than figure `b` (a tie is not).
    fn beats(self, a: f64, b: f64) -> bool {
        match self {
            Better::Higher => a > b,
            Better::Lower => a < b,
        }
    }
}

/// One table row: a figure per round per subject.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) unit: &'static str,
    pub(crate) better: Better,
    /// `values[round][subject]`.
    pub(crate) values: Vec<Vec<Option<f64>>>,
}

#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) subjects: usize,
    pub(crate) rows: Vec<Row>,
}

impl Table {
    pub(crate) fn record(
        &mut self,
        round: usize,
        subject: usize,
        name: &str,
        unit: &'static str,
        better: Better,
        value: Option<f64>,
    ) {
        let index = match self.rows.iter().position(|r| r.name == name) {
            Some(i) => i,
            None => {
                self.rows.push(Row {
                    name: name.to_owned(),
                    unit,
                    better,
                    values: Vec::new(),
                });
                self.rows.len() - 1
            }
        };
        let row = &mut self.rows[index];
        while row.values.len() <= round {
            row.values.push(vec![None; self.subjects]);
        }
        row.values[round][subject] = value;
    }

    pub(crate) fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }
}

pub(crate) fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

impl Row {
    pub(crate) fn of(&self, subject: usize) -> Vec<f64> {
        self.values.iter().filter_map(|r| r[subject]).collect()
    }

    pub(crate) fn median(&self, subject: usize) -> Option<f64> {
        median(self.of(subject))
    }

    /// The median over rounds of the subject's figure divided by the ceiling's in that round.
    pub(crate) fn ratio(&self, subject: usize) -> Option<f64> {
        median(
            self.values
                .iter()
                .filter_map(|r| Some(r[subject]? / r[0]?))
                .filter(|x| x.is_finite())
                .collect(),
        )
    }

    /// (max − min) / median of the subject's figures, as a percentage.
    pub(crate) fn spread(&self, subject: usize) -> Option<f64> {
        let values = self.of(subject);
        let min = values.iter().copied().reduce(f64::min)?;
        let max = values.iter().copied().reduce(f64::max)?;
        Some((max - min) / self.median(subject)? * 100.0).filter(|s| s.is_finite())
    }
}

pub(crate) fn show(value: f64, unit: &str) -> String {
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else if value >= 1.0 {
        2
    } else {
        3
    };
    if unit.is_empty() {
        format!("{value:.digits$}")
    } else {
        format!("{value:.digits$} {unit}")
    }
}

/// Prints the table as Markdown: the median per subject with its ratio to the ceiling, and the
/// spread of the subject under test across rounds.
#[allow(clippy::print_stdout)] // The report is the bench's output.
pub(crate) fn print_table(table: &Table, names: &[String], rounds: usize) {
    println!(
        "\n| scenario (median of {rounds}) | {} | spread of {} |",
        names.join(" | "),
        names[1]
    );
    println!("|{}", "---|".repeat(names.len() + 2));
    for row in &table.rows {
        let mut cells = vec![format!("{} ({})", row.name, row.unit)];
        for subject in 0..names.len() {
            cells.push(match (row.median(subject), row.ratio(subject)) {
                (Some(m), Some(r)) if subject > 0 => format!("{} ({r:.2}×)", show(m, "")),
                (Some(m), _) => show(m, ""),
                _ => "–".to_owned(),
            });
        }
        cells.push(
            row.spread(1)
                .map(|s| format!("{s:.0} %"))
                .unwrap_or_else(|| "–".to_owned()),
        );
        let arrow = match row.better {
            Better::Higher => "↑",
            Better::Lower => "↓",
        };
        println!("| {arrow} {} |", cells.join(" | "));
    }
}

/// Prints each target of issue 5 with the figure that decides it.
#[allow(clippy::print_stdout)] // The report is the bench's output.
pub(crate) fn print_targets(table: &Table, large_bytes: f64) {
    println!("\n| target (issue 5) | measured | met |");
    println!("|---|---|---|");
    let line = |target: String, measured: Option<f64>, ok: &dyn Fn(f64) -> bool, unit: &str| {
        let (shown, met) = match measured {
            Some(m) => (show(m, unit), if ok(m) { "yes" } else { "no" }),
            None => ("–".to_owned(), "not measured"),
        };
        println!("| {target} | {shown} | {met} |");
    };
    let ratio = |name: &str| table.row(name).and_then(|r| r.ratio(1));
    let value = |name: &str| table.row(name).and_then(|r| r.median(1));
    line(
        "pipelined small-message throughput ≥ 0.60× ceiling".into(),
        ratio(PIPELINED),
        &|r| r >= 0.60,
        "×",
    );
    line(
        "ping-pong p50 (pinned) ≤ 1.2× ceiling".into(),
        ratio(PING_P50),
        &|r| r <= 1.2,
        "×",
    );
    for name in [LARGE_100K, LARGE_10M] {
        line(
            format!("{name} throughput ≥ 0.80× ceiling"),
            ratio(name),
            &|r| r >= 0.80,
            "×",
        );
    }
    line(
        format!(
            "peak RSS with {} MB messages < 3× the message size",
            large_bytes / 1e6
        ),
        value(LARGE_10M_RSS).map(|mib| mib * MIB / large_bytes),
        &|r| r < 3.0,
        "× message size",
    );
    line(
        "idle RSS ≤ 3 MiB".into(),
        value(IDLE_RSS),
        &|m| m <= 3.0,
        "MiB",
    );
    line(
        "RSS under pipelined small messages ≤ 16 MiB".into(),
        value(PIPELINED_RSS),
        &|m| m <= 16.0,
        "MiB",
    );
    line(
        "stdin EOF to exit ≤ 2 ms".into(),
        value(EOF_EXIT),
        &|m| m <= 2.0,
        "ms",
    );
}

/// Prints each target of issue 13 (performance) with the figure that decides it.
#[allow(clippy::print_stdout)] // The report is the bench's output.
pub(crate) fn print_issue_13_targets(table: &Table, large_bytes: f64) {
    println!("\n| target (issue 13) | measured | met |");
    println!("|---|---|---|");
    let verdict = |target: &str, measured: Option<(String, bool)>| {
        let (shown, met) = match measured {
            Some((shown, ok)) => (shown, if ok { "yes" } else { "no" }),
            None => ("–".to_owned(), "not measured"),
        };
        println!("| {target} | {shown} | {met} |");
    };
    let ratio = |name: &str, ok: &dyn Fn(f64) -> bool| {
        let r = table.row(name)?.ratio(1)?;
        Some((show(r, "×"), ok(r)))
    };
    verdict(
        "pipelined 100 B ≥ 0.60× ceiling",
        ratio(PIPELINED, &|r| r >= 0.60),
    );
    verdict(
        "ping-pong p50 (pinned) ≤ 1.1× ceiling",
        ratio(PING_P50, &|r| r <= 1.1),
    );
    let ping = table.row(PING_P50);
    verdict(
        "ping-pong p50 (pinned) ≤ the naive loop's",
        ping.and_then(|row| {
            let (ours, naive) = (row.median(1)?, row.median(2)?);
            Some((
                format!("{} against {}", show(ours, "µs"), show(naive, "µs")),
                ours <= naive,
            ))
        }),
    );
    for name in [LARGE_100K, LARGE_10M] {
        verdict(
            &format!("{name} ≥ 1.0× the ceiling's MB/s"),
            ratio(name, &|r| r >= 1.0),
        );
    }
    verdict(
        &format!(
            "peak RSS with {} MB messages ≤ 2.5× the message",
            large_bytes / 1e6
        ),
        table.row(LARGE_10M_RSS).and_then(|row| {
            let r = row.median(1)? * MIB / large_bytes;
            Some((show(r, "× message size"), r <= 2.5))
        }),
    );
}

pub(crate) const PIPELINED: &str = "pipelined 100 B";
pub(crate) const PIPELINED_RSS: &str = "peak RSS, pipelined 100 B";
pub(crate) const LARGE_100K: &str = "100 KB messages";
pub(crate) const LARGE_10M: &str = "10 MB messages";
pub(crate) const LARGE_10M_RSS: &str = "peak RSS, 10 MB messages";
pub(crate) const PING_P50: &str = "ping-pong p50, pinned";
pub(crate) const IDLE_RSS: &str = "idle RSS after init burst";
/// 20 `sleep` calls of 200 ms in one write (smoke: 4 of 20 ms), to the last answer.
pub(crate) const SLOW_CALLS: &str = "20 concurrent 200 ms sleep calls, to the last answer";
pub(crate) const EOF_EXIT: &str = "stdin EOF to exit, idle";
pub(crate) const MIB: f64 = 1024.0 * 1024.0;

/// Prints, for every row, whether the subject under test (column 1) is ahead of every peer
/// (the columns from `first_peer` on): the issue's "ahead of every peer on every column". A
/// row a peer has no figure for (a scenario it was not given) is left out.
#[allow(clippy::print_stdout)] // The report is the bench's output.
pub(crate) fn print_peers(table: &Table, names: &[String], first_peer: usize, smoke: bool) {
    println!(
        "\n| against the peers (medians) | {} | best peer | ahead of every peer |",
        names[1]
    );
    println!("|---|---|---|---|");
    let (mut ahead, mut compared) = (0, 0);
    for row in &table.rows {
        let Some(ours) = row.median(1) else {
            continue;
        };
        let best = (first_peer..names.len())
            .filter_map(|peer| Some((peer, row.median(peer)?)))
            .reduce(|a, b| if row.better.beats(b.1, a.1) { b } else { a });
        let Some((best_peer, best_value)) = best else {
            continue;
        };
        let is_ahead = row.better.beats(ours, best_value);
        compared += 1;
        ahead += usize::from(is_ahead);
        println!(
            "| {} ({}) | {} | {} ({}) | {} |",
            row.name,
            row.unit,
            show(ours, ""),
            show(best_value, ""),
            names[best_peer],
            if is_ahead { "yes" } else { "no" }
        );
    }
    println!("\nahead of every peer on {ahead} of {compared} rows");
    if smoke {
        println!("(smoke mode: tiny workloads and 10 ms CPU ticks; the verdict is no measurement)");
    }
}
