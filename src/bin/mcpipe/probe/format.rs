//! How the probe writes numbers and command lines: every duration in milliseconds with its
//! unit, counts and rates with thousands separators, and the command shell-quoted so it can be
//! pasted back into a shell.

use std::ffi::OsString;
use std::time::Duration;

/// A duration in milliseconds, always with the unit: three significant digits below 100 ms,
/// whole milliseconds (with separators) above: `0.042 ms`, `2.80 ms`, `35.1 ms`, `2,607 ms`.
pub(crate) fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1000.0;
    if v < 1.0 {
        format!("{v:.3} ms")
    } else if v < 10.0 {
        format!("{v:.2} ms")
    } else if v < 100.0 {
        format!("{v:.1} ms")
    } else {
        format!("{} ms", count(v.round() as u64))
    }
}

/// A whole number with `,` between groups of three digits.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Requests per second, rounded, with separators.
pub(crate) fn rate(per_second: f64) -> String {
    format!("{} requests/s", count(per_second.round().max(0.0) as u64))
}

/// The command line as a POSIX shell would need it: arguments with anything but safe
/// characters go in single quotes, and one with a control character in bash's `$'...'`
/// quotes with that character escaped (the user's own command is printed: an escape
/// sequence in it must not drive the terminal, nor a newline start a line of its own).
pub(crate) fn shell_quote(command: &[OsString]) -> String {
    command
        .iter()
        .map(|arg| {
            let arg = arg.to_string_lossy();
            let safe = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
            if safe {
                arg.into_owned()
            } else if arg.chars().any(needs_escape) {
                ansi_c_quote(&arg)
            } else {
                format!("'{}'", arg.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `arg` in bash's ANSI-C quotes: control characters as `\n`, `\xHH` (below U+0080) or
/// `\uHHHH` (a C1 control, a line separator: `\x80` would be a lone byte, not the character).
fn ansi_c_quote(arg: &str) -> String {
    let mut out = String::from("$'");
    for c in arg.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A reason on one line, at most 200 characters: its lines joined with ` | `, then made
/// [`printable`] (a reason often quotes the server).
pub(crate) fn one_line(text: &str) -> String {
    let joined: String = text
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ");
    let joined = printable(&joined);
    if joined.chars().count() <= 200 {
        return joined;
    }
    let mut cut: String = joined.chars().take(197).collect();
    cut.push_str("...");
    cut
}

/// Text from the server made safe to print: every control character (C0, DEL, C1) and the
/// Unicode line and paragraph separators become visible escapes (`\n`, `\u{1b}`). A server's
/// text can then neither move the terminal's cursor nor start a line of its own, which GitHub
/// Actions would run as a workflow command if it began with `::`.
pub(crate) fn printable(text: &str) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// Text made safe for an XML attribute or element: the markup characters as entities, tab, LF
/// and CR as character references (an attribute would turn them into spaces), and what XML 1.0
/// cannot hold at all (the other C0 controls, U+FFFE, U+FFFF) as visible escapes, as
/// [`printable`] writes them: one such character from the server made the whole report
/// unreadable to every JUnit reader.
pub(crate) fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push_str(&format!("&#{};", c as u32)),
            c if !xml_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// XML 1.0's `Char` production: what a document may contain at all (a Rust `char` is never a
/// surrogate).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{fffd}' | '\u{10000}'..)
}

/// Text made safe for a GitHub Actions workflow command's message (`%`, CR and LF escaped).
pub(crate) fn github(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_milliseconds_with_three_significant_digits_or_separators() {
        assert_eq!(ms(Duration::from_micros(42)), "0.042 ms");
        assert_eq!(ms(Duration::from_micros(2_800)), "2.80 ms");
        assert_eq!(ms(Duration::from_micros(35_140)), "35.1 ms");
        assert_eq!(ms(Duration::from_millis(2_607)), "2,607 ms");
        assert_eq!(ms(Duration::from_secs(100)), "100,000 ms");
    }

    #[test]
    fn counts_and_rates_have_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(380_361), "380,361");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(rate(380_361.4), "380,361 requests/s");
    }

    #[test]
    fn arguments_that_need_quotes_get_them() {
        let command: Vec<OsString> = ["python3", "my server.py", "--name=a'b", "", "x/y.py"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(
            shell_quote(&command),
            "python3 'my server.py' '--name=a'\\''b' '' x/y.py"
        );
    }

    #[test]
    fn arguments_with_control_characters_are_quoted_with_escapes() {
        let command: Vec<OsString> = ["python3", "\u{1b}[2J'a\\b", "x\ny\u{85}\u{2028}\u{7f}"]
            .iter()
            .map(OsString::from)
            .collect();
        let quoted = shell_quote(&command);
        assert_eq!(
            quoted,
            "python3 $'\\x1b[2J\\'a\\\\b' $'x\\ny\\u0085\\u2028\\x7f'"
        );
        assert!(!quoted.chars().any(needs_escape), "{quoted:?}");
    }

    #[test]
    fn control_characters_from_the_server_are_printed_as_escapes() {
        assert_eq!(printable("plain name"), "plain name");
        assert_eq!(
            printable("x\n::error title=injected::y"),
            "x\\n::error title=injected::y"
        );
        assert_eq!(
            printable("a\u{1b}[2J\0b\rc\td"),
            "a\\u{1b}[2J\\u{0}b\\rc\\td"
        );
        assert_eq!(
            printable("\u{7f}\u{9b}\u{2028}é"),
            "\\u{7f}\\u{9b}\\u{2028}é"
        );
        assert_eq!(one_line("one\n  two\u{1b}[31m\n"), "one | two\\u{1b}[31m");
    }

    #[test]
    fn xml_and_github_text_is_escaped() {
        assert_eq!(xml("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(
            xml("]]>\u{fffe}\u{ffff}\0\u{1b}\t\r\n\u{fffd}\u{10000}"),
            "]]&gt;\\u{fffe}\\u{ffff}\\u{0}\\u{1b}&#9;&#13;&#10;\u{fffd}\u{10000}"
        );
        assert_eq!(github("50% done\nnext"), "50%25 done%0Anext");
    }
}
