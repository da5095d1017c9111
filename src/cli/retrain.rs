//! `tradebot retrain --config F [--kind ppo|lstm] [--json]`: asks a running daemon over its control socket
//! to start a retrain; when no daemon answers, runs the pipeline itself in the foreground, printing its
//! progress and each run's decision. Exit 1 when a foreground run failed (the champion is untouched).

use super::load_config;
use crate::control::{Request, client, socket_path};
use crate::models::ModelKind;
use crate::retrain::holdout::holdout_evaluator;
use crate::retrain::{Pipeline, PipelineSpec, Progress, RunOutcome, RunRecord, Trigger};
use crate::store::Store;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub fn run(config: Option<PathBuf>, kind: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
    let config = load_config(config)?;
    let kind: Option<ModelKind> = kind.map(|k| k.parse().map_err(anyhow::Error::msg)).transpose()?;
    let socket = socket_path(&config.state_dir);
    match client::request(&socket, &Request::Retrain { kind }, Duration::from_secs(35)) {
        Ok(r) => {
            if json {
                println!("{}", serde_json::to_string(&r)?);
            } else if let Some(e) = &r.error {
                eprintln!("the daemon refused: {e}");
            } else {
                println!("daemon: {}", r.message.as_deref().unwrap_or("retrain started"));
            }
            return Ok(if r.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        Err(client::ClientError::NotRunning(_)) => {}
        Err(e) => return Err(e).context("asking the daemon to retrain"),
    }
    if !json {
        println!("no daemon on {}: retraining in the foreground", socket.display());
    }
    let store = Store::open(&config.state_dir).context("opening the store")?;
    crate::data::ensure_bars(&config, &store)?;
    let spec = PipelineSpec::from_config(&config).context("locating the tradebot binary and the config file")?;
    let pipeline = Pipeline::new(spec, store.clone(), holdout_evaluator(&config, &store));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let kinds = kind.map_or_else(|| vec![ModelKind::Ppo, ModelKind::Lstm], |k| vec![k]);
    // SIGTERM, SIGINT or SIGHUP stop the run: the child is killed, the run recorded as interrupted.
    let cancel = CancellationToken::new();
    let signal = rt.block_on(async { on_signal(cancel.clone()) }).context("installing the signal handlers")?;
    let mut failed = false;
    for k in kinds {
        let trigger = Trigger { reason: "command line".into(), clock_time: chrono::Utc::now() };
        let record = rt.block_on(pipeline.run_until(k, trigger, &mut |p| show(&p, json), &cancel));
        failed |= matches!(record.outcome, RunOutcome::Failed | RunOutcome::Interrupted);
        if cancel.is_cancelled() {
            break;
        }
    }
    store.flush()?;
    if cancel.is_cancelled() {
        let (sig, code) = signal.get().copied().unwrap_or(("a signal", 130));
        eprintln!("retrain interrupted by {sig}: the training child was stopped, the champion is unchanged");
        return Ok(ExitCode::from(code));
    }
    if !config.retrain.enabled && !json {
        println!("(retrain.enabled = false: the daemon would not retrain on its schedule)");
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Cancels `cancel` at the first SIGTERM, SIGINT or SIGHUP; the cell names it and its exit code (128 + n).
fn on_signal(cancel: CancellationToken) -> std::io::Result<Arc<OnceLock<(&'static str, u8)>>> {
    use tokio::signal::unix::{SignalKind, signal};
    let which = Arc::new(OnceLock::new());
    for (kind, name) in [
        (SignalKind::terminate(), ("SIGTERM", 143)),
        (SignalKind::interrupt(), ("SIGINT", 130)),
        (SignalKind::hangup(), ("SIGHUP", 129)),
    ] {
        let mut s = signal(kind)?;
        let (cancel, which) = (cancel.clone(), which.clone());
        tokio::spawn(async move {
            if s.recv().await.is_some() {
                let _ = which.set(name);
                cancel.cancel();
            }
        });
    }
    Ok(which)
}

fn show(p: &Progress, json: bool) {
    if json {
        let v = match p {
            Progress::Snapshot { kind, bars } => serde_json::json!({"event":"snapshot","kind":kind,"bars":bars}),
            Progress::Training { kind, line } => serde_json::json!({"event":"train","kind":kind,"line":line}),
            Progress::Evaluating { kind, candidate } => {
                serde_json::json!({"event":"evaluate","kind":kind,"candidate":candidate})
            }
            Progress::Finished(r) => serde_json::json!({"event":"finished","record":r}),
        };
        println!("{v}");
        return;
    }
    match p {
        Progress::Snapshot { kind, bars } => println!("{}: snapshot of {bars} bars written", kind.as_str()),
        Progress::Training { kind, line } => println!("{}: {line}", kind.as_str()),
        Progress::Evaluating { kind, candidate } => {
            println!("{}: backtesting {candidate} and the champion on the holdout", kind.as_str())
        }
        Progress::Finished(r) => print_record(r),
    }
}

fn print_record(r: &RunRecord) {
    println!("{}: {} — {}", r.kind.as_str(), r.outcome.as_str(), r.reason());
    if let Some(d) = &r.decision {
        let numbers: Vec<String> = d.numbers.iter().map(|(k, v)| format!("{k}={v:.4}")).collect();
        println!("  gate: {}", numbers.join(" "));
    }
    match (&r.champion_before, &r.champion_after) {
        (b, a) if b != a => {
            println!("  champion: {} -> {}", b.as_deref().unwrap_or("none"), a.as_deref().unwrap_or("none"))
        }
        (b, _) => println!("  champion: {} (unchanged)", b.as_deref().unwrap_or("none")),
    }
}
