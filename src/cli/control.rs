//! `tradebot pause|resume|flatten`: asks the running daemon over its control socket. With no daemon there
//! is nothing to pause or flatten: a clear error, exit 1.

use super::load_config;
use crate::control::{Request, client, socket_path};
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub fn run(config: Option<PathBuf>, req: Request) -> anyhow::Result<ExitCode> {
    let config = load_config(config)?;
    let socket = socket_path(&config.state_dir);
    let r = match client::request(&socket, &req, Duration::from_secs(35)) {
        Ok(r) => r,
        Err(client::ClientError::NotRunning(_)) => {
            anyhow::bail!("no tradebot daemon answers on {}: start it with `tradebot run` first", socket.display())
        }
        Err(e) => return Err(e).context("asking the daemon"),
    };
    match (&r.message, &r.error) {
        (_, Some(e)) => eprintln!("the daemon refused: {e}"),
        (Some(m), None) => println!("daemon: {m}"),
        (None, None) => println!("daemon: done"),
    }
    Ok(if r.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
