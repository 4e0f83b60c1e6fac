//! The tests' process table (tests/util/procs.rs): `ps`, which the helpers use where there is
//! no `/proc` (macOS), sees a live process, a zombie and a reaped one as they are; on Linux it
//! agrees with `/proc`, which the helpers use there.

mod util;

use std::process::Command;
use std::time::{Duration, Instant};

use util::procs::{self, Process};
use util::{watchdog, BOUND};

const LIMIT: Duration = Duration::from_secs(30);

/// This process as `ps` lists it, alone and among all.
fn me_by_ps() -> (Process, Process) {
    let me = std::process::id();
    let alone = procs::from_ps(&["-p", &me.to_string()]);
    assert_eq!(alone.len(), 1, "{alone:?}");
    let among = procs::from_ps(&["-A"]).into_iter().find(|p| p.pid == me);
    (alone[0].clone(), among.expect("this process in `ps -A`"))
}

#[test]
fn ps_sees_this_process_alive_with_its_parent_and_group() {
    let _w = watchdog("ps_sees_this_process", LIMIT);
    let me = std::process::id();
    let (alone, among) = me_by_ps();
    assert_eq!(alone, among);
    assert!(alone.live(), "{alone:?}");
    assert!(procs::alive_from_ps(me));
    assert_eq!(alone.ppid, std::os::unix::process::parent_id());
    if cfg!(target_os = "linux") {
        assert!(procs::alive_from_proc(me));
        let by_proc = procs::all_from_proc().into_iter().find(|p| p.pid == me);
        let by_proc = by_proc.expect("this process in /proc");
        assert_eq!((by_proc.ppid, by_proc.pgid), (alone.ppid, alone.pgid));
    }
}

#[test]
fn ps_sees_a_zombie_as_not_alive_and_a_reaped_child_as_gone() {
    let _w = watchdog("ps_sees_a_zombie", LIMIT);
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    // Not waited for: once it exits it is a zombie until reaped.
    let started = Instant::now();
    let zombie = loop {
        let found = procs::from_ps(&["-p", &pid.to_string()]);
        if let Some(p) = found.first().filter(|p| p.state == "Z") {
            break p.clone();
        }
        assert!(started.elapsed() < BOUND, "never a zombie: {found:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(zombie.ppid, std::process::id());
    assert!(!zombie.live());
    assert!(!procs::alive_from_ps(pid));
    if cfg!(target_os = "linux") {
        assert!(!procs::alive_from_proc(pid));
        let by_proc = procs::all_from_proc().into_iter().find(|p| p.pid == pid);
        assert_eq!(by_proc.map(|p| p.state), Some("Z".to_owned()));
    }
    child.wait().unwrap();
    assert!(procs::from_ps(&["-p", &pid.to_string()]).is_empty());
    assert!(!procs::alive_from_ps(pid));
    if cfg!(target_os = "linux") {
        assert!(!procs::alive_from_proc(pid));
    }
}
