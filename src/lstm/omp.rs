//! How libtorch's OpenMP threads wait, for the LSTM's training processes.
//!
//! libtorch and its oneDNN LSTM run their intra-op work on libgomp, whose threads spin at every barrier
//! (GOMP_SPINCOUNT 300,000 by default) before they sleep. The LSTM meets a barrier several times per time
//! step. When another process holds one of the cores (a build beside the training), the thread that
//! arrives first spins while the one it waits for is off the core: `perf` put 59 % of `tradebot bench
//! lstm`'s time in libgomp's spin loop at a load average of 3.5 on 2 cores, and the epoch ran 4× slower
//! than with `OMP_WAIT_POLICY=PASSIVE` in the same minutes. Never spinning costs time on an idle machine,
//! though (a thread put to sleep at each barrier is woken late), so the threads spin briefly instead:
//! `GOMP_SPINCOUNT=3000`. On the 2-core build VM (benches/RESULTS.md, issue 39 item 3, 2026-11-27 14:39–
//! 14:53 UTC) an epoch took 19.2–19.6 s with it, 21.1–22.3 s with PASSIVE and 19.1–21.7 s with libgomp's
//! default when nothing else ran; beside three busy loops, 66.8 s with it, 65.1 s with PASSIVE, and over
//! 150 s with the default.
//!
//! libgomp reads its settings once, when it is loaded, before `main`; so a process that finds neither
//! setting in its environment runs itself again with `GOMP_SPINCOUNT=3000` (same arguments, same process
//! id). Either variable set by the user is left as it is.

use std::ffi::OsString;

/// The variable set, and the value: libgomp's threads spin this many times at a barrier, then sleep.
pub(crate) const SPIN: (&str, &str) = ("GOMP_SPINCOUNT", "3000");

/// Whether a process with this environment should run itself again with [`SPIN`].
fn needs_setting(var: impl Fn(&str) -> Option<OsString>) -> bool {
    var("OMP_WAIT_POLICY").is_none() && var("GOMP_SPINCOUNT").is_none()
}

/// Replaces this process with itself under `GOMP_SPINCOUNT=3000`, unless libgomp's wait is already set.
/// Call it first thing, before any output or thread. Returns only when no re-run is needed or the re-run
/// failed (then training goes on with libgomp's default, and a warning says so).
pub(crate) fn spin_briefly() {
    use std::os::unix::process::CommandExt as _;
    if !needs_setting(|k| std::env::var_os(k)) {
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
    let e = cmd.args(args).env(SPIN.0, SPIN.1).exec();
    warn(&e);
}

/// On stderr: this runs before the command sets up its logging.
fn warn(e: &std::io::Error) {
    crate::out::errln!(
        "warning: could not run again with {}={} ({e}): libtorch's threads spin long while they wait, and \
         training runs slower when other processes share the cores; set it in the environment to avoid this",
        SPIN.0,
        SPIN.1
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_setting_of_the_users_is_kept() {
        let env = |set: &'static [&'static str]| move |k: &str| set.contains(&k).then(|| OsString::from("x"));
        assert!(needs_setting(env(&[])));
        assert!(needs_setting(env(&["OMP_NUM_THREADS"])));
        assert!(!needs_setting(env(&["OMP_WAIT_POLICY"])));
        assert!(!needs_setting(env(&["GOMP_SPINCOUNT"])));
    }
}
