//! Risk and crash safety end to end, against the `tradebot` binary: `tradebot risk status|clear` over a
//! kill switch tripped in a state directory (`cli`), and the daemon killed with SIGKILL at random points
//! against an in-process fake Alpaca (`crash`).

mod cli;
#[path = "../common/mod.rs"]
mod common;
mod crash;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The binary with a clean environment (no keys, no journal, no RUST_LOG) plus `envs`.
pub fn tradebot(args: &[&str], envs: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tradebot"));
    c.args(args).current_dir(root());
    for k in ["RUST_LOG", "TRADEBOT_CONFIG", "APCA_API_KEY_ID", "APCA_API_SECRET_KEY", "CREDENTIALS_DIRECTORY"] {
        c.env_remove(k);
    }
    c.env_remove("JOURNAL_STREAM");
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A copy of the demo config with its state under `dir`.
pub fn demo_config_in(dir: &Path) -> PathBuf {
    let demo = std::fs::read_to_string(root().join("config/tradebot.toml")).unwrap();
    let demo =
        demo.replace("state_dir = \"./var\"", &format!("state_dir = {:?}", dir.join("state").display().to_string()));
    let p = dir.join("t.toml");
    std::fs::write(&p, demo).unwrap();
    p
}
