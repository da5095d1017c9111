//! How libtorch's OpenMP threads wait, for the LSTM's training processes.
//!
//! libtorch and its oneDNN LSTM run their intra-op work on libgomp, whose threads spin at every barrier
//! (GOMP_SPINCOUNT 300,000 by default) before they sleep. The LSTM meets a barrier several times per time
//! step. When another process holds one of the cores (a build beside the training), the thread that
//! arrives first spins while the one it waits for is off the core: `perf` put 59 % of `tradebot bench
//! lstm`'s time in libgomp's spin loop at a load average of 3.5 on 2 cores, and the epoch ran 4× slower
//! than with `OMP_WAIT_POLICY=PASSIVE` in the same minutes (benches/RESULTS.md, issue 39 item 3).
//!
//! libgomp reads its settings once, when it is loaded, before `main`; so a process that finds neither
//! setting in its environment runs itself again with `OMP_WAIT_POLICY=PASSIVE` (same arguments, same
//! process id). Either variable set by the user is left as it is.

use std::ffi::OsString;

/// The variable set, and the value.
pub(crate) const WAIT_POLICY: (&str, &str) = ("OMP_WAIT_POLICY", "PASSIVE");

/// Whether a process with this environment should run itself again with [`WAIT_POLICY`].
fn needs_passive(var: impl Fn(&str) -> Option<OsString>) -> bool {
    var("OMP_WAIT_POLICY").is_none() && var("GOMP_SPINCOUNT").is_none()
}

/// Replaces this process with itself under `OMP_WAIT_POLICY=PASSIVE`, unless libgomp's wait is already
/// set. Call it first thing, before any output or thread. Returns only when no re-run is needed or the
/// re-run failed (then training goes on with libgomp's default, and a warning says so).
pub(crate) fn wait_passively() {
    use std::os::unix::process::CommandExt as _;
    if !needs_passive(|k| std::env::var_os(k)) {
        return;
    }
    let mut args = std::env::args_os();
    let arg0 = args.next();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return warn(&e),
    };
    let mut cmd = std::process::Command::new(exe);
    if let Some(a) = arg0 {
        cmd.arg0(a);
    }
    let e = cmd.args(args).env(WAIT_POLICY.0, WAIT_POLICY.1).exec();
    warn(&e);
}

/// On stderr: this runs before the command sets up its logging.
fn warn(e: &std::io::Error) {
    crate::out::errln!(
        "warning: could not run again with {}={} ({e}): libtorch's threads spin while they wait, and training \
         runs slower when other processes share the cores; set it in the environment to avoid this",
        WAIT_POLICY.0,
        WAIT_POLICY.1
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_setting_of_the_users_is_kept() {
        let env = |set: &'static [&'static str]| move |k: &str| set.contains(&k).then(|| OsString::from("x"));
        assert!(needs_passive(env(&[])));
        assert!(needs_passive(env(&["OMP_NUM_THREADS"])));
        assert!(!needs_passive(env(&["OMP_WAIT_POLICY"])));
        assert!(!needs_passive(env(&["GOMP_SPINCOUNT"])));
    }
}
