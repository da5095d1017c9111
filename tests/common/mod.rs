//! Helpers shared by the integration tests.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Sends `sig` to the process `pid` (a child the test started); panics with the reason if it cannot.
pub fn signal(pid: u32, sig: Signal) {
    let pid = i32::try_from(pid).expect("a pid fits in i32");
    kill(Pid::from_raw(pid), sig).unwrap_or_else(|e| panic!("sending {sig} to pid {pid}: {e}"));
}
