//! `tradebot risk status|clear --config F`: the kill switch as stored in the state directory. `status`
//! reads the store (beside a running daemon, its read snapshot); `clear` goes through the running daemon,
//! whose engine forgets the switch before its next bar, or with none running clears it in the store.
//! Either way it logs and prints who cleared it and when.

use super::RiskCmd;
use crate::config::Config;
use crate::out::{OutError, outln};
use crate::risk::{DayOpen, KillSwitchState, clear_kill_switch, stored_state};
use crate::store::Store;
use anyhow::Context;
use std::process::ExitCode;

pub(super) fn run(cmd: RiskCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        RiskCmd::Status { config, json } => status(&super::load_config(config)?, json),
        RiskCmd::Clear { config } => clear(&super::load_config(config)?),
    }
}

fn status(config: &Config, json: bool) -> anyhow::Result<ExitCode> {
    let store = super::read_store(config)?;
    let (kill, day) = stored_state(&store).context("reading the risk state")?;
    if json {
        let v = serde_json::json!({
            "tripped": kill.is_some(),
            "kill_switch": kill,
            "day_open": day,
            "limits": &config.risk,
        });
        outln!("{v}")?;
        return Ok(ExitCode::SUCCESS);
    }
    print_kill(kill.as_ref())?;
    print_day(day.as_ref())?;
    let r = &config.risk;
    outln!(
        "limits: daily loss {}%, position {}% of equity, gross {}% of equity, order {} notional, bar age {} s, extended hours {}",
        r.daily_loss_limit_pct * 100.0,
        r.max_position_pct * 100.0,
        r.max_gross_exposure_pct * 100.0,
        r.max_order_notional,
        r.max_bar_age.as_secs(),
        r.extended_hours
    )?;
    Ok(ExitCode::SUCCESS)
}

fn print_kill(kill: Option<&KillSwitchState>) -> Result<(), OutError> {
    match kill {
        None => outln!("kill switch: not tripped")?,
        Some(k) => {
            outln!("kill switch: TRIPPED at {} (trading day {})", k.tripped_at, k.day)?;
            outln!("  why: {}", k.reason)?;
            outln!("  equity {} against {} at the open; action {:?}", k.equity, k.open_equity, k.action)?;
            outln!("  clear it with: tradebot risk clear --config FILE")?;
        }
    }
    Ok(())
}

fn print_day(day: Option<&DayOpen>) -> Result<(), OutError> {
    match day {
        Some(d) => outln!(
            "trading day {}: reference equity {} (the previous close, as of {}; the first figure of the day when none came before)",
            d.day,
            d.equity,
            d.at
        )?,
        None => outln!("trading day: no equity seen yet")?,
    }
    Ok(())
}

/// The person clearing: `$SUDO_USER` (who ran sudo), `$USER`, `$LOGNAME`, else the uid.
fn who() -> String {
    ["SUDO_USER", "USER", "LOGNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| {
            use std::os::unix::fs::MetadataExt;
            // /proc/self belongs to the process's real uid.
            std::fs::metadata("/proc/self")
                .map_or_else(|_| "an unknown user".to_string(), |m| format!("uid {}", m.uid()))
        })
}

fn clear(config: &Config) -> anyhow::Result<ExitCode> {
    let who = who();
    let req = crate::control::Request::RiskClear { who: who.clone() };
    if let Some(r) = super::control::ask_daemon(config, &req, std::time::Duration::from_secs(35))? {
        outln!("{} (by the running daemon)", r.message.as_deref().unwrap_or("done"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let store = Store::open(&config.state_dir).context("opening the store")?;
    let now = crate::clock::now();
    match clear_kill_switch(&store, &who, now).context("clearing the kill switch")? {
        Some(k) => {
            outln!("kill switch cleared by {who} at {now} (it tripped at {}: {})", k.tripped_at, k.reason)?;
        }
        None => outln!("kill switch was not tripped; nothing to clear ({who} at {now})")?,
    }
    Ok(ExitCode::SUCCESS)
}
