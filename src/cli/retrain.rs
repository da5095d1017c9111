//! `tradebot retrain --config F [--kind ppo|lstm] [--json]`: asks a running daemon over its control socket
//! to start a retrain; when no daemon answers, runs the pipeline itself in the foreground, printing its
//! progress and each run's decision. Exit 1 when a foreground run failed (the champion is untouched).

use super::load_config;
use crate::control::{Request, client, socket_path};
use crate::models::ModelKind;
use crate::out::{OutError, errln, outln};
use crate::retrain::holdout::holdout_evaluator;
use crate::retrain::{PipelineSpec, Progress, RetrainPipeline, RunOutcome, RunRecord, Trigger};
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
                outln!("{}", serde_json::to_string(&r)?)?;
            } else if let Some(e) = &r.error {
                errln!("the daemon refused: {e}");
            } else {
                outln!("daemon: {}", r.message.as_deref().unwrap_or("retrain started"))?;
            }
            return Ok(if r.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        Err(client::ClientError::NotRunning(_)) => {}
        Err(e) => return Err(e).context("asking the daemon to retrain"),
    }
    if !json {
        outln!("no daemon on {}: retraining in the foreground", socket.display())?;
    }
    let store = Store::open(&config.state_dir).context("opening the store")?;
    crate::data::ensure_bars(&config, &store)?;
    let spec = PipelineSpec::from_config(&config).context("locating the tradebot binary and the config file")?;
    let pipeline = RetrainPipeline::new(spec, store.clone(), holdout_evaluator(&config, &store));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let kinds = kind.map_or_else(|| vec![ModelKind::Ppo, ModelKind::Lstm], |k| vec![k]);
    // SIGTERM, SIGINT or SIGHUP stop the run: the child is killed, the run recorded as interrupted.
    let cancel = CancellationToken::new();
    let signal = rt.block_on(async { on_signal(cancel.clone()) }).context("installing the signal handlers")?;
    // The retrain's clock: now, or the end of the stored bars when they end earlier (an offline replay's
    // store), so that a rolling `[train]` window ends where the data does.
    let now = crate::clock::now();
    let tf = config.market.timeframe;
    let ends: Vec<_> = config.market.symbols.iter().filter_map(|s| store.last_bar_time(s, tf).ok().flatten()).collect();
    let clock_time = match ends.iter().min() {
        Some(end) if *end < now && ends.len() == config.market.symbols.len() => {
            log::info!("the stored {tf} bars end at {end}: retraining as of then");
            *end
        }
        _ => now,
    };
    let mut failed = false;
    // Progress that stdout refused: the runs go on (a model half trained helps no one), the error ends the command.
    let mut unwritten = None;
    for k in kinds {
        let trigger = Trigger { reason: "command line".into(), clock_time };
        let record = rt.block_on(pipeline.run_until(
            k,
            trigger,
            &mut |p| {
                if let Err(e) = show(&p, json) {
                    unwritten.get_or_insert(e);
                }
            },
            &cancel,
        ));
        failed |= matches!(record.outcome, RunOutcome::Failed | RunOutcome::Interrupted);
        if cancel.is_cancelled() {
            break;
        }
    }
    store.flush()?;
    if let Some(e) = unwritten {
        return Err(e.into());
    }
    if cancel.is_cancelled() {
        let (sig, code) = signal.get().copied().unwrap_or(("a signal", 130));
        errln!("retrain interrupted by {sig}: the training child was stopped, the champion is unchanged");
        return Ok(ExitCode::from(code));
    }
    if !config.retrain.enabled && !json {
        outln!("(retrain.enabled = false: the daemon would not retrain on its schedule)")?;
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

fn show(p: &Progress, json: bool) -> Result<(), OutError> {
    if json {
        let v = match p {
            Progress::Snapshot { kind, bars } => serde_json::json!({"event":"snapshot","kind":kind,"bars":bars}),
            Progress::Training { kind, line } => serde_json::json!({"event":"train","kind":kind,"line":line}),
            Progress::Evaluating { kind, candidate } => {
                serde_json::json!({"event":"evaluate","kind":kind,"candidate":candidate})
            }
            Progress::Finished(r) => serde_json::json!({"event":"finished","record":r}),
        };
        return outln!("{v}");
    }
    match p {
        Progress::Snapshot { kind, bars } => outln!("{}: snapshot of {bars} bars written", kind.as_str())?,
        Progress::Training { kind, line } => outln!("{}: {}", kind.as_str(), describe(line))?,
        Progress::Evaluating { kind, candidate } => {
            outln!("{}: backtesting {candidate} and the champion on the holdout", kind.as_str())?
        }
        Progress::Finished(r) => print_record(r)?,
    }
    Ok(())
}

/// A training child's JSON line for people: its event, then its fields as `key=value` (whole numbers
/// without decimals), e.g. `epoch: epoch=4 train_loss=0.6931 val_mcc=0.0123`.
fn describe(line: &serde_json::Value) -> String {
    let Some(o) = line.as_object() else { return line.to_string() };
    let event = o.get("event").and_then(|e| e.as_str()).unwrap_or("progress");
    let fields: Vec<String> = o
        .iter()
        .filter(|(k, _)| k.as_str() != "event")
        .map(|(k, v)| match v {
            serde_json::Value::Number(n) => format!("{k}={}", crate::domain::figure(n.as_f64().unwrap_or(f64::NAN))),
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    format!("{event}: {}", fields.join(" "))
}

fn print_record(r: &RunRecord) -> Result<(), OutError> {
    outln!("{}: {} — {}", r.kind.as_str(), r.outcome.as_str(), r.reason())?;
    if let Some(d) = &r.decision {
        let numbers: Vec<String> =
            d.numbers.iter().map(|(k, v)| format!("{k}={}", crate::domain::figure(*v))).collect();
        outln!("  gate: {}", numbers.join(" "))?;
    }
    match (&r.champion_before, &r.champion_after) {
        (b, a) if b != a => {
            outln!("  champion: {} -> {}", b.as_deref().unwrap_or("none"), a.as_deref().unwrap_or("none"))?
        }
        (b, _) => outln!("  champion: {} (unchanged)", b.as_deref().unwrap_or("none"))?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_child_line_reads_as_words_and_figures_not_json() {
        let line = serde_json::json!({"event": "epoch", "epoch": 4, "train_loss": 0.512345, "device": "cpu"});
        assert_eq!(super::describe(&line), "epoch: device=cpu epoch=4 train_loss=0.5123");
        assert_eq!(super::describe(&serde_json::json!(3)), "3");
    }
}
