//! The `tradebot` binary end to end, one file per topic: `config check` and its exit codes, secrets never
//! printed and the live gate (`config`); data import and show across the AAPL split, and the backtest's
//! outputs (`data`); the store's lock, damage, restore and a full disk (`store`); the models, doctor and
//! bench commands and every command's output on a closed pipe (`commands`).

mod commands;
#[path = "../common/mod.rs"]
mod common;
mod config;
mod data;
mod store;

use common::{demo_config, write_config};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A copy of the demo config with its state under `dir`, and extra lines appended.
fn config_in(dir: &Path, extra_top: &str, extra_end: &str) -> PathBuf {
    write_config(dir, &format!("{extra_top}\n{}\n{extra_end}", demo_config(dir)))
}

fn tradebot(args: &[&str], envs: &[(&str, &str)]) -> Output {
    common::tradebot_env(args, envs)
}
