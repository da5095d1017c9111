//! `tradebot models list|show|promote|rollback|seed`: the model registry under `state_dir/models`.

use super::{ModelsCmd, load_config};
use crate::models::{ModelKind, Registry};
use crate::out::{errln, outln};
use anyhow::Context;
use std::process::ExitCode;

pub(super) fn run(cmd: ModelsCmd) -> anyhow::Result<ExitCode> {
    let config_path = match &cmd {
        ModelsCmd::List { config, .. }
        | ModelsCmd::Show { config, .. }
        | ModelsCmd::Promote { config, .. }
        | ModelsCmd::Rollback { config, .. }
        | ModelsCmd::Seed { config, .. } => config.clone(),
    };
    let config = load_config(config_path)?;
    let reg = if matches!(cmd, ModelsCmd::List { .. } | ModelsCmd::Show { .. }) {
        // Read-only: nothing is created, and a missing state directory is said as such.
        Registry::open_read_only(&super::existing_state_dir(&config)?.join("models"))
    } else {
        Registry::open(&config.state_dir.join("models")).context("opening the model registry")?
    };
    match cmd {
        ModelsCmd::List { json, .. } => list(&reg, json),
        ModelsCmd::Show { id, .. } => {
            let (m, bytes) = reg.load(&id)?;
            outln!("{}", serde_json::to_string_pretty(&m)?)?;
            errln!("{}: {} bytes of ONNX, hash verified", m.id, bytes.len());
            Ok(ExitCode::SUCCESS)
        }
        ModelsCmd::Promote { id, reason, .. } => {
            let req = crate::control::Request::Promote { id: id.clone(), reason: reason.clone() };
            if let Some(code) = through_daemon(&config, &req)? {
                return Ok(code);
            }
            let m = reg.promote(&id, &reason)?;
            outln!("{} is now the {} champion", m.id, m.kind.as_str())?;
            Ok(ExitCode::SUCCESS)
        }
        ModelsCmd::Seed { from, .. } => seed(&reg, &from, &config),
        ModelsCmd::Rollback { kind, reason, .. } => {
            let kind: ModelKind = kind.parse().map_err(anyhow::Error::msg)?;
            let req = crate::control::Request::Rollback { kind, reason: reason.clone() };
            if let Some(code) = through_daemon(&config, &req)? {
                return Ok(code);
            }
            let m = reg.rollback(kind, &reason)?;
            outln!("rolled back: {} is the {} champion again", m.id, m.kind.as_str())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `models list`: every model's manifest as JSON, or a table; an unreadable one fails the command.
fn list(reg: &Registry, json: bool) -> anyhow::Result<ExitCode> {
    let (models, bad) = reg.list()?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&models)?)?;
    } else {
        outln!("{:<22} {:<5} {:<10} {:<20} metrics", "id", "kind", "state", "created")?;
        for m in &models {
            let metrics: Vec<String> =
                m.metrics.iter().map(|(k, v)| format!("{k}={}", crate::domain::figure(*v))).collect();
            outln!(
                "{:<22} {:<5} {:<10} {:<20} {}",
                m.id,
                m.kind.as_str(),
                m.state.as_str().to_string(),
                m.created_at.format("%Y-%m-%d %H:%M:%S"),
                metrics.join(" ")
            )?;
        }
        if models.is_empty() {
            outln!("(no models in {})", reg.root().display())?;
        }
    }
    for e in &bad {
        errln!("unreadable: {e}");
    }
    Ok(if bad.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `models seed`: models imported from `from`, and champions crowned among those that fit the config.
fn seed(reg: &Registry, from: &std::path::Path, config: &crate::config::Config) -> anyhow::Result<ExitCode> {
    // Only models trained for this config (symbols, timeframe, features) are crowned, as the
    // daemon seeds: a misfit champion would only fail later, in a backtest or at start.
    let rep = reg.seed_fitting(from, &|m| crate::daemon::start::fits(m, config))?;
    let ids = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    outln!(
        "imported {} model(s) from {}: {}; new champions: {}",
        rep.imported.len(),
        from.display(),
        ids(&rep.imported),
        ids(&rep.champions)
    )?;
    for e in &rep.refused {
        errln!("refused: {e}");
    }
    for (id, why) in &rep.not_applicable {
        errln!(
            "not made champion: {id} does not fit {}: {why}; train one for this config with `tradebot train ppo --config {0}` (or `tradebot retrain --config {0}`)",
            config.source.display()
        );
    }
    let ok = rep.refused.is_empty() && rep.not_applicable.is_empty();
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// A change to the champions goes through the daemon running on this state directory, which swaps the
/// model it trades with at the next bar (changing the registry under it would leave it trading the old
/// one until a restart). `None`: no daemon answers, the registry is changed here.
fn through_daemon(config: &crate::config::Config, req: &crate::control::Request) -> anyhow::Result<Option<ExitCode>> {
    use crate::control::client::{ClientError, request};
    let socket = crate::control::socket_path(&config.state_dir);
    match request(&socket, req, std::time::Duration::from_secs(30)) {
        Err(ClientError::NotRunning(_)) => Ok(None),
        Err(e) => Err(e.into()),
        Ok(resp) if resp.ok => {
            outln!("{} (by the running daemon)", resp.message.as_deref().unwrap_or("done"))?;
            Ok(Some(ExitCode::SUCCESS))
        }
        Ok(resp) => anyhow::bail!("the running daemon refused: {}", resp.error.as_deref().unwrap_or("no reason given")),
    }
}
