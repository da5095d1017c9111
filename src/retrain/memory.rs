//! The training child's own memory limit, so that a trainer that grows cannot take the daemon's memory
//! (the two share the unit's cgroup): `retrain.memory_mb`, by default three quarters of the memory the
//! daemon may use (the machine's, or its cgroup's limit when lower: the unit's `MemoryMax`). Two guards: the child caps its own private writable memory with `RLIMIT_DATA` first thing
//! (`limit_self`: an allocation past it fails inside the trainer, never in the daemon), and the daemon
//! reads the resident memory of the child's process group twice a second and kills it past the budget with an error that
//! names the setting (`group_resident_mb`).

/// Set for the child: its memory budget in MiB (absent: no cap).
pub const MEMORY_ENV: &str = "TRADEBOT_TRAIN_MEMORY_MB";

/// The budget when `retrain.memory_mb` is not set: three quarters of `MemTotal` or of this process's
/// cgroup memory limit, whichever is lower; `None` when `/proc/meminfo` cannot be read (no cap then).
pub fn default_budget_mb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let total = field_kib(&text, "MemTotal:")? / 1024;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok();
    let cgroup = own.and_then(|c| cgroup_limit_mb(&c, |p| std::fs::read_to_string(p).ok()));
    Some(total.min(cgroup.unwrap_or(u64::MAX)) * 3 / 4)
}

/// The memory limit of the cgroup `/proc/self/cgroup` names, in MiB: v2's `memory.max`, or v1's
/// `memory.limit_in_bytes`; `None` when there is none ("max", or v1's near-2^63 "unlimited").
fn cgroup_limit_mb(own: &str, read: impl Fn(&str) -> Option<String>) -> Option<u64> {
    let limit = |file: String| read(&file).and_then(|v| v.trim().parse::<u64>().ok()).filter(|b| *b < 1 << 62);
    own.lines()
        .find_map(|l| {
            let (hierarchy, path) = l.split_once(':').map(|(_, r)| r).and_then(|r| r.split_once(':'))?;
            match hierarchy {
                "" => limit(format!("/sys/fs/cgroup{path}/memory.max")),
                "memory" => limit(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")),
                _ => None,
            }
        })
        .map(|bytes| bytes >> 20)
}

/// The resident memory (`VmRSS`) of every process in the child's process group (the child leads its own
/// group, so anything it started counts too), in MiB; `None` once the group has gone.
pub fn group_resident_mb(pgid: u32) -> Option<u64> {
    let mut kib = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if pid == pgid || process_group(pid) == Some(pgid) {
            let rss = std::fs::read_to_string(format!("/proc/{pid}/status")).ok().and_then(|t| field_kib(&t, "VmRSS:"));
            if let Some(r) = rss {
                kib = Some(kib.unwrap_or(0) + r);
            }
        }
    }
    kib.map(|k| k / 1024)
}

/// A process's group, from `/proc/PID/stat` (the fifth field; the second, the name in parentheses, may
/// hold spaces, so fields count from its closing parenthesis).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(2)?.parse().ok()
}

/// `Name:   1234 kB` in a /proc file: the number.
fn field_kib(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// In the training child: caps this process's private writable memory at the budget the daemon passed
/// (`MEMORY_ENV`). Says what it did on stderr (the daemon logs the child's stderr); a value it cannot use
/// or a refused limit is said too, and training goes on under the daemon's resident-memory guard.
pub fn limit_self() {
    let Some(v) = std::env::var_os(MEMORY_ENV) else { return };
    let Some(mb) = v.to_str().and_then(|s| s.parse::<u64>().ok()).filter(|mb| *mb > 0) else {
        eprintln!("{MEMORY_ENV}={v:?} is not a number of MiB: the trainer runs without its own memory cap");
        return;
    };
    let bytes = mb.saturating_mul(1 << 20);
    match nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_DATA, bytes, bytes) {
        Ok(()) => eprintln!("trainer memory capped at {mb} MiB (retrain.memory_mb)"),
        Err(e) => eprintln!("cannot cap the trainer's memory at {mb} MiB: {e}; the daemon's guard still applies"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_read_in_kib() {
        let status = "Name:\ttradebot\nVmPeak:\t  900000 kB\nVmRSS:\t  524288 kB\nThreads:\t4\n";
        assert_eq!(field_kib(status, "VmRSS:"), Some(524288));
        assert_eq!(field_kib(status, "VmSwap:"), None);
        assert_eq!(field_kib("VmRSS: lots", "VmRSS:"), None);
        // This process (counted as its own group's leader) is resident, and the machine has memory to give
        // three quarters of.
        let me = group_resident_mb(std::process::id()).unwrap();
        assert!(me > 0, "a test process holds more than a MiB");
        assert!(default_budget_mb().unwrap() > me);
        assert_eq!(group_resident_mb(u32::MAX), None, "no such process");
        assert_eq!(process_group(std::process::id()), nix::unistd::getpgrp().as_raw().try_into().ok());
    }

    #[test]
    fn the_cgroup_limit_is_read_from_v2_or_v1_and_unlimited_is_none() {
        let files = |f: &str| match f {
            "/sys/fs/cgroup/system.slice/tradebot.service/memory.max" => Some("25769803776\n".to_string()),
            "/sys/fs/cgroup/memory/svc/memory.limit_in_bytes" => Some("1073741824".to_string()),
            "/sys/fs/cgroup/memory/free/memory.limit_in_bytes" => Some("9223372036854771712".to_string()),
            "/sys/fs/cgroup/user.slice/memory.max" => Some("max".to_string()),
            _ => None,
        };
        assert_eq!(cgroup_limit_mb("0::/system.slice/tradebot.service\n", files), Some(24 * 1024));
        assert_eq!(cgroup_limit_mb("9:name=systemd:/\n4:memory:/svc\n0::/\n", files), Some(1024));
        assert_eq!(cgroup_limit_mb("4:memory:/free\n", files), None);
        assert_eq!(cgroup_limit_mb("0::/user.slice\n", files), None);
        assert_eq!(cgroup_limit_mb("", files), None);
    }
}
