//! Helpers shared by the integration tests: the binary with a clean environment, its output as text, the
//! demo config under a test's own state directory, and signals. Each test crate uses a part of them.
#![allow(dead_code)]

pub(crate) mod cdp;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository (the binary runs from here, so relative paths in the demo config resolve).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `[env]` keys the shipped PPO model was trained under (target weights against equal-weight
/// buy-and-hold, as `config/tradebot.toml` says): a config without them refuses that model at load.
pub(crate) const SHIPPED_PPO_ENV: &str = "action_space = \"weights\"\nno_trade_band = 0.10\nmax_weight = 0.4\nreward = \"vs-benchmark\"\nturnover_bps = 50\n";

/// Variables that would change what the binary reads or where it reports: never inherited by a test.
const CLEARED: &[&str] = &[
    "RUST_LOG",
    "TRADEBOT_CONFIG",
    "APCA_API_KEY_ID",
    "APCA_API_SECRET_KEY",
    "CREDENTIALS_DIRECTORY",
    "NOTIFY_SOCKET",
    "JOURNAL_STREAM",
    "TRADEBOT_WEB_TOKEN",
    "TRADEBOT_MODELS_DIR",
];

/// `tradebot ARGS` from the repository, with none of the `CLEARED` variables.
pub(crate) fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tradebot"));
    c.args(args).current_dir(root());
    for k in CLEARED {
        c.env_remove(k);
    }
    c
}

/// `tradebot ARGS` as `command` makes it, under a shell that first sets its limits on open files to
/// `(soft, hard)`.
pub(crate) fn command_with_open_files((soft, hard): (u32, u32), args: &[&str]) -> Command {
    let mut c = Command::new("sh");
    let script = format!("ulimit -S -n {soft} && ulimit -H -n {hard} && exec \"$0\" \"$@\"");
    c.arg("-c").arg(script).arg(env!("CARGO_BIN_EXE_tradebot"));
    c.args(args).current_dir(root());
    for k in CLEARED {
        c.env_remove(k);
    }
    c
}

/// Runs `tradebot ARGS` to its end.
pub(crate) fn tradebot(args: &[&str]) -> Output {
    command(args).output().expect("tradebot runs")
}

/// Runs `tradebot ARGS` to its end with `envs` set.
pub(crate) fn tradebot_env(args: &[&str], envs: &[(&str, &str)]) -> Output {
    command(args).envs(envs.iter().copied()).output().expect("tradebot runs")
}

/// Standard output and error, one after the other.
pub(crate) fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The demo config's text with its state directory under `dir`.
pub(crate) fn demo_config(dir: &Path) -> String {
    let demo = std::fs::read_to_string(root().join("config/tradebot.toml")).expect("the demo config");
    let line = "state_dir = \"./var\"";
    assert!(demo.contains(line), "the demo config names its state directory as {line}");
    demo.replace(line, &format!("state_dir = {:?}", dir.join("state").display().to_string()))
}

/// Writes `text` as `dir/t.toml` and returns its path.
pub(crate) fn write_config(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("t.toml");
    std::fs::write(&p, text).expect("the test config is written");
    p
}

/// Sends `sig` to the process `pid` (a child the test started); panics with the reason if it cannot.
pub(crate) fn signal(pid: u32, sig: Signal) {
    let pid = i32::try_from(pid).expect("a pid fits in i32");
    kill(Pid::from_raw(pid), sig).unwrap_or_else(|e| panic!("sending {sig} to pid {pid}: {e}"));
}

/// Waits up to `within` for `child` to exit and returns how it did; past that, fails with `why` and the
/// daemon's log as `log` reads it then.
pub(crate) fn wait_exit(
    child: &mut std::process::Child,
    within: std::time::Duration,
    why: &str,
    log: impl Fn() -> String,
) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().expect("the child's status can be read") {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "{why}:\n{}", log());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A spawned daemon that is killed when the test lets go of it, so that a failed assertion does not
/// leave a `tradebot run` behind holding its store, its port or the CPU for the tests after it.
pub(crate) struct Reaped(pub(crate) std::process::Child);

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
