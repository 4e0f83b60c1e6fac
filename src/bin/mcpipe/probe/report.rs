//! The probe's outputs: the table (with GitHub annotations on request), the JSON report
//! (schema `mcpipe-probe/1`, documented in docs/probe.md) and JUnit XML.
//!
//! A row's verdict comes from the check's finding and the level it rests on: a shortfall at
//! MUST is FAIL; at SHOULD it is WARN (FAIL under `--strict`); a measurement's is WARN.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::checks::Check;
use super::format::{github, ms, one_line, printable, xml};
use super::grading::{Item, Level, Outcome, Status};
use super::target::Target;

/// The version of the JSON report's shape; bumped only when a field changes meaning or goes.
pub(crate) const SCHEMA: &str = "mcpipe-probe/1";

/// How to print.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) json: bool,
    pub(crate) github: bool,
    pub(crate) strict: bool,
    pub(crate) colour: bool,
}

/// A row's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    Warn,
    Fail,
    Skip,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        }
    }
}

/// One check's graded result.
#[derive(Debug)]
pub(crate) struct Row {
    name: &'static str,
    level: Level,
    rule: String,
    verdict: Verdict,
    elapsed: Duration,
    /// The finding on one line, at most 200 characters ([`one_line`]): for the table, the
    /// annotations and JUnit.
    detail: String,
    /// The finding as the check wrote it (a server's whole error message, its lines kept):
    /// the JSON report's `full_detail`, the one place a user can read what the cut left out.
    full_detail: String,
    items: Vec<Item>,
}

impl Row {
    pub(crate) fn new(check: &Check, outcome: Outcome, elapsed: Duration, strict: bool) -> Row {
        let level = outcome.level.unwrap_or(check.level);
        let verdict = match (outcome.status, level) {
            (Status::Pass, _) => Verdict::Pass,
            (Status::Skip, _) => Verdict::Skip,
            (Status::Short, Level::Must) => Verdict::Fail,
            (Status::Short, Level::Should) if strict => Verdict::Fail,
            (Status::Short, _) => Verdict::Warn,
        };
        Row {
            name: check.name,
            level,
            rule: outcome.rule.unwrap_or_else(|| check.rule.to_owned()),
            verdict,
            elapsed,
            detail: one_line(&outcome.detail),
            full_detail: outcome.detail,
            items: outcome.items,
        }
    }
}

pub(crate) fn header(out: &mut impl Write, options: &Options, target: &Target) {
    if options.json {
        return;
    }
    let _ = writeln!(out, "probing: {}", target.display());
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<16} {:<6} {:<6} {:>10}  DETAIL",
        "CHECK", "RESULT", "LEVEL", "TIME"
    );
    let _ = out.flush();
}

fn paint(verdict: Verdict, colour: bool) -> String {
    let label = format!("{:<6}", verdict.label());
    if !colour {
        return label;
    }
    let code = match verdict {
        Verdict::Pass => "32",
        Verdict::Fail => "31",
        Verdict::Warn | Verdict::Skip => "33",
    };
    format!("\x1b[{code}m{label}\x1b[0m")
}

pub(crate) fn row(out: &mut impl Write, options: &Options, row: &Row) {
    if options.json {
        return;
    }
    let _ = writeln!(
        out,
        "{:<16} {} {:<6} {:>10}  {}",
        row.name,
        paint(row.verdict, options.colour),
        row.level.label(),
        ms(row.elapsed),
        row.detail
    );
    for item in &row.items {
        let _ = writeln!(
            out,
            "{:<16}   {:<8} {}: {}",
            "",
            item.action,
            printable(&item.name),
            one_line(&item.detail)
        );
    }
    if matches!(row.verdict, Verdict::Warn | Verdict::Fail) {
        let _ = writeln!(out, "{:<16}   rule: {}", "", row.rule);
    }
    let _ = out.flush();
}

/// Prints the summary (or the whole JSON report); returns whether the run failed.
pub(crate) fn finish(
    out: &mut impl Write,
    options: &Options,
    target: &Target,
    rows: &[Row],
    elapsed: Duration,
) -> bool {
    let n = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let (passed, warned, failed, skipped) = (
        n(Verdict::Pass),
        n(Verdict::Warn),
        n(Verdict::Fail),
        n(Verdict::Skip),
    );
    if options.json {
        let _ = writeln!(out, "{}", json_report(options, target, rows, elapsed));
    } else {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{passed} passed, {warned} warned, {failed} failed, {skipped} skipped in {}",
            ms(elapsed)
        );
        let verdict = match (failed, warned, options.strict) {
            (0, 0, _) => "PASS",
            (0, _, _) => "PASS with warnings (--strict fails on a missed SHOULD)",
            (_, _, false) => "FAIL: a MUST of the specification failed",
            (_, _, true) => "FAIL: a MUST (or, with --strict, a SHOULD) failed",
        };
        let _ = writeln!(out, "{verdict}");
        if options.github {
            for row in rows
                .iter()
                .filter(|r| matches!(r.verdict, Verdict::Warn | Verdict::Fail))
            {
                let kind = if row.verdict == Verdict::Fail {
                    "error"
                } else {
                    "warning"
                };
                let _ = writeln!(
                    out,
                    "::{kind} title=mcpipe probe {} ({})::{} [{}]",
                    row.name,
                    row.level.label(),
                    github(&row.detail),
                    github(&row.rule)
                );
            }
        }
    }
    let _ = out.flush();
    failed > 0
}

fn json_report(options: &Options, target: &Target, rows: &[Row], elapsed: Duration) -> Value {
    let n = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let checks: Vec<Value> = rows
        .iter()
        .map(|row| {
            let mut check = json!({
                "name": row.name,
                "status": row.verdict.label(),
                "level": row.level.label(),
                "rule": row.rule,
                "ms": millis(row.elapsed),
                "detail": row.detail,
                "full_detail": row.full_detail,
            });
            if !row.items.is_empty() {
                check["tools"] = row
                    .items
                    .iter()
                    .map(|i| json!({"name": i.name, "action": i.action, "detail": i.detail}))
                    .collect();
            }
            check
        })
        .collect();
    json!({
        "schema": SCHEMA,
        "target": target.display(),
        "command": target.command().iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
        "strict": options.strict,
        "time_scale": target.scale,
        "verdict": if n(Verdict::Fail) > 0 { "FAIL" } else { "PASS" },
        "passed": n(Verdict::Pass),
        "warned": n(Verdict::Warn),
        "failed": n(Verdict::Fail),
        "skipped": n(Verdict::Skip),
        "ms": millis(elapsed),
        "checks": checks,
    })
}

/// Milliseconds as a JSON number with microsecond precision.
fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The results as a JUnit XML test suite: FAIL rows are failures, WARN rows pass with the
/// warning in `system-out`, SKIP rows are skipped. `errors` is always 0 (a check does not
/// error, it finds) but written: Ant's format, which Jenkins reads, requires it.
pub(crate) fn junit(target: &Target, rows: &[Row], elapsed: Duration) -> String {
    let n = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let mut xml_out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml_out.push_str(&format!(
        "<testsuite name=\"mcpipe probe\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">\n",
        rows.len(),
        n(Verdict::Fail),
        n(Verdict::Skip),
        elapsed.as_secs_f64()
    ));
    xml_out.push_str(&format!(
        "  <properties><property name=\"target\" value=\"{}\"/></properties>\n",
        xml(&target.display())
    ));
    for row in rows {
        xml_out.push_str(&format!(
            "  <testcase classname=\"mcpipe.probe\" name=\"{}\" time=\"{:.3}\">",
            xml(row.name),
            row.elapsed.as_secs_f64()
        ));
        let message = format!("{} [{} {}]", row.detail, row.level.label(), row.rule);
        match row.verdict {
            Verdict::Fail => xml_out.push_str(&format!("<failure message=\"{}\"/>", xml(&message))),
            Verdict::Skip => {
                xml_out.push_str(&format!("<skipped message=\"{}\"/>", xml(&row.detail)))
            }
            Verdict::Warn => {
                xml_out.push_str(&format!("<system-out>WARN: {}</system-out>", xml(&message)))
            }
            Verdict::Pass => {}
        }
        xml_out.push_str("</testcase>\n");
    }
    xml_out.push_str("</testsuite>\n");
    xml_out
}

/// Replaces the file at `path` with `text` in one step: written to a temporary file in the
/// same directory, then renamed over it. A probe killed midway leaves the old file whole
/// (and at worst the temporary one), never a truncated report no JUnit reader can parse.
pub(crate) fn write_file(path: &str, text: &str) -> io::Result<()> {
    let path = Path::new(path);
    let Some(name) = path.file_name() else {
        // Not a file's name ("dir/..", "/"): the plain write says why it fails.
        return std::fs::write(path, text);
    };
    let mut temporary = name.to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary);
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// The JUnit XML the `--junit` file holds while the probe runs: one test case in error, "the
/// probe did not finish". A probe that is killed (a cancelled CI job) leaves it behind.
pub(crate) fn junit_unfinished() -> String {
    String::from(concat!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
        "<testsuite name=\"mcpipe probe\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0.000\">\n",
        "  <testcase classname=\"mcpipe.probe\" name=\"run\" time=\"0.000\">",
        "<error message=\"the probe did not finish (it was interrupted or killed)\"/>",
        "</testcase>\n",
        "</testsuite>\n"
    ))
}
