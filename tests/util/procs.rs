//! The process table as the tests see it: whether a process lives, and each process's parent,
//! group and state. Linux reads `/proc`; elsewhere (macOS has no `/proc`) `ps(1)` answers.
//! Both readers are compiled everywhere, and tests/process_table.rs checks on Linux that they
//! agree, so the one macOS uses is tested where CI runs.

use std::process::Command;

/// One process, as far as the tests look at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    pub pgid: u32,
    /// The state letter: `R`, `S`, ..., `Z` for a zombie (`X` for a dead one, Linux).
    pub state: String,
}

impl Process {
    /// Not a zombie, nor dead.
    pub fn live(&self) -> bool {
        !matches!(self.state.as_str(), "Z" | "X")
    }
}

/// Whether `pid` names a live process (one that exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        alive_from_proc(pid)
    } else {
        alive_from_ps(pid)
    }
}

/// [`alive`] as `ps` tells it.
pub fn alive_from_ps(pid: u32) -> bool {
    from_ps(&["-p", &pid.to_string()])
        .first()
        .is_some_and(Process::live)
}

/// Every process the system lists.
pub fn all() -> Vec<Process> {
    if cfg!(target_os = "linux") {
        all_from_proc()
    } else {
        from_ps(&["-A"])
    }
}

/// Linux: the state letter of `/proc/PID/stat` (the first field after the command's `)`).
pub fn alive_from_proc(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => match stat.rsplit_once(')') {
            Some((_, rest)) => !matches!(rest.trim_start().chars().next(), Some('Z' | 'X')),
            None => true,
        },
        Err(_) => false,
    }
}

/// Linux: every `/proc/PID/stat`.
pub fn all_from_proc() -> Vec<Process> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces): state, ppid, pgrp, ...
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u32>().ok());
        if let (Some(state), Some(ppid), Some(pgid)) = (fields.first(), number(1), number(2)) {
            found.push(Process {
                pid,
                ppid,
                pgid,
                state: (*state).to_owned(),
            });
        }
    }
    found
}

/// `ps -o pid=,ppid=,pgid=,stat=` with `selection` (`-A`, or `-p PID`): the columns both
/// Linux's procps and macOS's ps know. `stat` begins with the state letter (`Ss`, `R+`, `Z`).
/// An empty list when `ps` finds nothing (it then exits with 1) or cannot run.
pub fn from_ps(selection: &[&str]) -> Vec<Process> {
    let Ok(out) = Command::new("ps")
        .args(selection)
        .args(["-o", "pid=,ppid=,pgid=,stat="])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let mut number = || fields.next()?.parse::<u32>().ok();
            let (pid, ppid, pgid) = (number()?, number()?, number()?);
            let state = fields.next()?.chars().next()?.to_string();
            Some(Process {
                pid,
                ppid,
                pgid,
                state,
            })
        })
        .collect()
}

/// The peak resident memory (`VmHWM`) of a live process, in KiB: Linux only (`/proc`), where
/// it must be there. `None` elsewhere: the tests then leave their memory bounds unchecked.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    Some(kib)
}
