//! Tests of the server's pipes as the client reads them: a short read stands in for the
//! `EAGAIN` read, a hang-up is read to end of file, and bytes a short read left behind (a
//! server writing packets) are found by the confirming read. Linux only: they start small
//! programs and use Linux's packet pipes. Each runs under a watchdog; every wait is bounded.
#![cfg(target_os = "linux")]

use super::*;
use crate::test_watchdog::{watchdog, LIMIT};

fn spawn(program: &str, args: &[&str]) -> ServerProcess {
    let spec = Spawn {
        program: program.into(),
        args: args.iter().map(OsString::from).collect(),
        env_allowlist: None,
        envs: Vec::new(),
        cwd: None,
    };
    ServerProcess::spawn(&spec, 1 << 20).expect("the program starts")
}

/// Waits (bounded) until `done` holds, calling `step` between short waits.
fn wait_for(
    process: &mut ServerProcess,
    what: &str,
    mut step: impl FnMut(&mut ServerProcess),
    done: impl Fn(&mut ServerProcess) -> bool,
) {
    let end = Instant::now() + LIMIT / 2;
    while !done(process) {
        assert!(Instant::now() < end, "{what} did not happen");
        process
            .wait(Some(Duration::from_millis(100)))
            .expect("polling works");
        step(process);
    }
}

/// The complete lines of stdout read so far.
fn lines(process: &mut ServerProcess) -> Vec<String> {
    let mut lines = Vec::new();
    while let Some(line) = process.next_line() {
        if let Line::Complete(line) = line {
            lines.push(String::from_utf8_lossy(line).into_owned());
        }
    }
    lines
}

#[test]
fn a_short_read_of_the_servers_stdout_stands_in_for_the_eagain_read() {
    watchdog(|| {
        let mut cat = spawn("cat", &[]);
        cat.stdout_ready.skips_left = 1;
        cat.send_raw(b"{}\n");
        wait_for(
            &mut cat,
            "the echo",
            |p| {
                p.read_available(&mut |_| {});
            },
            |p| p.bytes_in > 0,
        );
        assert_eq!(lines(&mut cat), ["{}"]);
        assert_eq!(
            (cat.stdout_ready.skips_left, cat.may_have_input()),
            (0, false),
            "the read that returned 3 bytes of 64 KiB emptied the pipe: it stood in for the \
             read that says EAGAIN"
        );
        // Ping-pong goes on: the next answer wakes the wait and is read.
        cat.send_raw(b"[]\n");
        wait_for(
            &mut cat,
            "the second echo",
            |p| {
                p.read_available(&mut |_| {});
            },
            |p| p.bytes_in > 3,
        );
        assert_eq!(lines(&mut cat), ["[]"]);
    });
}

#[test]
fn a_server_that_wrote_and_exited_is_read_to_end_of_file_after_a_short_read() {
    watchdog(|| {
        let mut server = spawn("sh", &["-c", "echo '{}'"]);
        // Every event is taken before the first read: the last one says the pipe hung up, and
        // no event will come again, so only that remembered hang-up makes the client read on.
        wait_for(&mut server, "the exit", |_| {}, |p| p.has_exited());
        server.wait(Some(Duration::ZERO)).expect("polling works");
        server.stdout_ready.skips_left = 1;
        server.read_available(&mut |_| {});
        assert!(
            server.stdout_eof(),
            "one read_available after the hang-up reads to end of file"
        );
        assert_eq!(lines(&mut server), ["{}"]);
    });
}

#[test]
fn packets_a_short_read_left_behind_are_found_by_the_confirming_read() {
    watchdog(|| {
        // Packet mode on the server's end of its stdout: each read returns one packet, so a
        // short read leaves the second behind, with no event to come for it. "sent" on stderr
        // says both are in the pipe; then the server waits for its stdin to end.
        let script = "import fcntl, os, sys
fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_DIRECT)
os.write(1, b'{\"a\":1}\\n')
os.write(1, b'{\"b\":2}\\n')
os.write(2, b'sent\\n')
sys.stdin.read()";
        let mut server = spawn("python3", &["-c", script]);
        server.stdout_ready.ready = false;
        server.stderr_ready.ready = false;
        wait_for(&mut server, "the packets", |_| {}, |p| p.stderr_ready.ready);
        server.stdout_ready.skips_left = 1;
        server.read_available(&mut |_| {});
        assert_eq!(lines(&mut server), [r#"{"a":1}"#], "one packet a read");
        assert!(
            !server.may_have_input(),
            "the short read stood in for EAGAIN"
        );
        // Nothing will wake this wait but its own limit; the read after it finds the packet.
        server.wait(Some(LIMIT / 4)).expect("polling works");
        server.read_available(&mut |_| {});
        assert_eq!(
            lines(&mut server),
            [r#"{"b":2}"#],
            "the packet left behind was read after the quiet wait"
        );
    });
}
