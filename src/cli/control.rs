//! `tradebot pause|resume|flatten`: asks the running daemon over its control socket. With no daemon there
//! is nothing to pause or flatten: a clear error, exit 1. `ask_daemon`: the same question for the
//! commands that change the store through a running daemon and work on the store themselves without one
//! (`risk clear`, `data import`).

use super::load_config;
use crate::control::{Request, client, socket_path};
use crate::out::{errln, outln};
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub(super) fn run(config: Option<PathBuf>, req: Request) -> anyhow::Result<ExitCode> {
    let config = load_config(config)?;
    let socket = socket_path(&config.state_dir);
    // A flatten is judged by what the engine did: its outcome's number before, then after.
    let before = if req == Request::Flatten { flatten_seq(&socket) } else { 0 };
    let r = match client::request(&socket, &req, Duration::from_secs(35)) {
        Ok(r) => r,
        Err(client::ClientError::NotRunning(_)) => {
            anyhow::bail!("no tradebot daemon answers on {}: start it with `tradebot run` first", socket.display())
        }
        Err(e) => return Err(e).context("asking the daemon"),
    };
    match (&r.message, &r.error) {
        (_, Some(e)) => errln!("the daemon refused: {e}"),
        (Some(m), None) => outln!("daemon: {m}")?,
        (None, None) => outln!("daemon: done")?,
    }
    if !r.ok {
        return Ok(ExitCode::FAILURE);
    }
    if req == Request::Flatten {
        return wait_for_flatten(&socket, before);
    }
    Ok(ExitCode::SUCCESS)
}

/// `req` answered by the daemon running on the config's state directory; `None` where none runs. A
/// refusal is an error that gives the daemon's reason.
pub(super) fn ask_daemon(
    config: &crate::config::Config,
    req: &Request,
    timeout: Duration,
) -> anyhow::Result<Option<crate::control::Response>> {
    let socket = socket_path(&config.state_dir);
    match client::request(&socket, req, timeout) {
        Err(client::ClientError::NotRunning(_)) => Ok(None),
        Err(e) => Err(e).context("asking the running daemon"),
        Ok(r) if r.ok => Ok(Some(r)),
        Ok(r) => anyhow::bail!("the running daemon refused: {}", r.error.as_deref().unwrap_or("no reason given")),
    }
}

/// How long `tradebot flatten` waits for the engine's outcome (the sells sent, the cancels confirmed).
const FLATTEN_WAIT: Duration = Duration::from_secs(20);

fn flatten_seq(socket: &std::path::Path) -> u64 {
    client::request(socket, &Request::Status, Duration::from_secs(35))
        .ok()
        .and_then(|r| r.status)
        .and_then(|s| s.flatten)
        .map_or(0, |f| f.seq)
}

/// Waits for the engine's outcome of this flatten: exit 0 once the broker accepted every sell, 1 when one
/// could not be sent, was refused, or still waits (for a cancel, for the broker) after `FLATTEN_WAIT` (the
/// status says which and why).
fn wait_for_flatten(socket: &std::path::Path, before: u64) -> anyhow::Result<ExitCode> {
    let deadline = std::time::Instant::now() + FLATTEN_WAIT;
    let mut last = None;
    while std::time::Instant::now() < deadline {
        let r = client::request(socket, &Request::Status, Duration::from_secs(35)).context("asking the daemon")?;
        if let Some(f) = r.status.and_then(|s| s.flatten).filter(|f| f.seq > before) {
            let done = f.waiting.is_empty() && f.unconfirmed.is_empty();
            last = Some(f);
            if done {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let Some(f) = last else {
        errln!("the daemon did not report the flatten within {} s: see `tradebot status`", FLATTEN_WAIT.as_secs());
        return Ok(ExitCode::FAILURE);
    };
    let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    outln!("sells sent: {}", list(&f.sent))?;
    if !f.waiting.is_empty() {
        errln!(
            "still waiting for the cancel of our buys of {} after {} s (the broker refuses a sell against a working buy): see `tradebot status`",
            f.waiting.join(", "),
            FLATTEN_WAIT.as_secs()
        );
    }
    if !f.unconfirmed.is_empty() {
        errln!(
            "the broker has not accepted the sells of {} after {} s: see `tradebot status`",
            f.unconfirmed.join(", "),
            FLATTEN_WAIT.as_secs()
        );
    }
    for e in &f.failed {
        errln!("NOT sold: {e}");
    }
    let clean = f.failed.is_empty() && f.waiting.is_empty() && f.unconfirmed.is_empty();
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
