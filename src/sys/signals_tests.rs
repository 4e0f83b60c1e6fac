//! A signal disposition the embedding program sets while our guards live is its own: the last
//! guard's restore leaves it. Dispositions belong to the whole process and the library's tests
//! run on parallel threads (some start servers, which take the guards), so the test runs
//! itself again in a child process where it is the only test.

use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::sys::signal_process;

const INNER: &str = "MCPIPE_TEST_SIGNAL_DISPOSITIONS";
const NAME: &str = "sys::signals::tests::a_disposition_the_embedder_sets_meanwhile_stays";

extern "C" fn embedders_handler(_: libc::c_int) {}

fn embedders() -> libc::sighandler_t {
    embedders_handler as extern "C" fn(libc::c_int) as usize as libc::sighandler_t
}

#[test]
fn a_disposition_the_embedder_sets_meanwhile_stays() {
    if std::env::var_os(INNER).is_some() {
        return alone_in_the_process();
    }
    let child = Command::new(std::env::current_exe().unwrap())
        .args([NAME, "--exact", "--nocapture", "--test-threads", "1"])
        .env(INNER, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    // The watchdog: the child only makes a few sigaction calls, so 60 s is a hang.
    let output = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = signal_process(pid, libc::SIGKILL);
            let _ = waiter.join();
            panic!("the run alone in a child process did not finish within 60 s");
        }
    };
    let _ = waiter.join();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the run alone failed:\n{text}");
    assert!(text.contains("1 passed"), "{text}");
}

/// The checks, in a process where nothing else touches signal dispositions.
fn alone_in_the_process() {
    // SIGPIPE and SIGXFSZ: the embedder installs a handler while two guards live.
    for signo in WRITE_SIGNALS {
        let first = SignalIgnored::new(signo).unwrap();
        let second = SignalIgnored::new(signo).unwrap();
        assert_eq!(current_handler(signo).unwrap(), libc::SIG_IGN);
        drop(first);
        install(signo, embedders()).unwrap();
        drop(second);
        assert_eq!(
            current_handler(signo).unwrap(),
            embedders(),
            "the last guard of {signo} undid the handler the embedder installed"
        );
        // Left alone meanwhile, the disposition found comes back.
        let guard = SignalIgnored::new(signo).unwrap();
        assert_eq!(current_handler(signo).unwrap(), libc::SIG_IGN);
        drop(guard);
        assert_eq!(current_handler(signo).unwrap(), embedders());
    }
    assert!(
        SignalIgnored::new(libc::SIGTERM).is_err(),
        "not a write's signal"
    );

    // The shutdown signals: the embedder takes SIGTERM back while a subscription lives.
    let found: Vec<_> = SHUTDOWN_SIGNALS
        .iter()
        .map(|signo| current_handler(*signo).unwrap())
        .collect();
    let (write, _read) = mio::unix::pipe::new().unwrap();
    let subscription = SignalSubscription::new(write.as_fd()).unwrap();
    for signo in SHUTDOWN_SIGNALS {
        assert_eq!(current_handler(signo).unwrap(), shutdown_handler());
    }
    install(libc::SIGTERM, embedders()).unwrap();
    drop(subscription);
    assert_eq!(
        current_handler(libc::SIGTERM).unwrap(),
        embedders(),
        "the last SignalSubscription undid the SIGTERM handler the embedder installed"
    );
    // SIGINT and SIGHUP were left alone: what was found comes back.
    for (signo, found) in SHUTDOWN_SIGNALS.iter().zip(found).skip(1) {
        assert_eq!(current_handler(*signo).unwrap(), found, "signal {signo}");
    }
}
