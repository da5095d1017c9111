//! Risk and crash safety end to end, against the `tradebot` binary: `tradebot risk status|clear` over a
//! kill switch tripped in a state directory (`cli`), and the daemon killed with SIGKILL at random points
//! against an in-process fake Alpaca (`crash`).

mod cli;
#[path = "../common/mod.rs"]
mod common;
mod crash;
mod limits;

pub(crate) use common::text;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary with a clean environment plus `envs`.
pub fn tradebot(args: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut c = common::command(args);
    c.envs(envs.iter().copied());
    c
}

/// A copy of the demo config with its state under `dir`.
pub fn demo_config_in(dir: &Path) -> PathBuf {
    common::write_config(dir, &common::demo_config(dir))
}
