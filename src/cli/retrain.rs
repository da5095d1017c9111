//! `tradebot retrain --config F [--kind ppo|lstm] [--json]`: asks a running daemon over its control socket
//! to start a retrain; when no daemon answers, runs the pipeline itself in the foreground, printing its
//! progress and each run's decision. Exit 1 when a foreground run failed (the champion is untouched).

use super::load_config;
use crate::control::{Request, client, socket_path};
use crate::models::ModelKind;
use crate::out::{OutError, errln, outln};
use crate::retrain::holdout::holdout_evaluator;
use crate::retrain::{PipelineSpec, RetrainPipeline, RetrainProgress, RunOutcome, Trigger};
use crate::store::Store;
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(super) fn run(config: Option<PathBuf>, kind: Option<String>, json: bool) -> anyhow::Result<ExitCode> {
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
    let clock_time = clock_time(&config, &store);
    let mut failed = false;
    // Progress that stdout refused: the runs go on (a model half trained helps no one), the error ends the command.
    let mut unwritten = None;
    let mut shown = Shown::default();
    for k in kinds {
        let trigger = Trigger { reason: "command line".into(), clock_time };
        let record = rt.block_on(pipeline.run_until(
            k,
            trigger,
            &mut |p| {
                if let Err(e) = show(&p, json, &mut shown) {
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

/// The retrain's clock: now, or the end of the stored bars when they end earlier (an offline replay's
/// store), so that a rolling `[train]` window ends where the data does.
fn clock_time(config: &crate::config::Config, store: &Store) -> chrono::DateTime<chrono::Utc> {
    let now = crate::clock::now();
    let tf = config.market.timeframe;
    let ends: Vec<_> = config.market.symbols.iter().filter_map(|s| store.last_bar_time(s, tf).ok().flatten()).collect();
    match ends.iter().min() {
        Some(end) if *end < now && ends.len() == config.market.symbols.len() => {
            log::info!("the stored {tf} bars end at {end}: retraining as of then");
            *end
        }
        _ => now,
    }
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

/// What the foreground run has shown: the last progress fraction said per kind (a line each tenth).
#[derive(Default)]
struct Shown(std::collections::BTreeMap<&'static str, f64>);

fn show(p: &RetrainProgress, json: bool, shown: &mut Shown) -> Result<(), OutError> {
    if json {
        let v = match p {
            RetrainProgress::Snapshot { kind, bars } => serde_json::json!({"event":"snapshot","kind":kind,"bars":bars}),
            RetrainProgress::Training { kind, line } => serde_json::json!({"event":"train","kind":kind,"line":line}),
            RetrainProgress::Evaluating { kind, candidate } => {
                serde_json::json!({"event":"evaluate","kind":kind,"candidate":candidate})
            }
            RetrainProgress::Finished(r) => serde_json::json!({"event":"finished","record":r}),
        };
        return outln!("{v}");
    }
    for line in lines(p, shown) {
        outln!("{line}")?;
    }
    Ok(())
}

/// The lines for people, in the daemon's words: the run's progress as the dashboard shows it (done of
/// total, rate, ETA; a line each tenth of the run), and the decision as the replay's summary says it
/// (outcome — reason, then the gate's numbers).
fn lines(p: &RetrainProgress, shown: &mut Shown) -> Vec<String> {
    use crate::domain::count;
    match p {
        RetrainProgress::Snapshot { kind, bars } => {
            vec![format!("{}: snapshot of {} bars written", kind.as_str(), count(*bars as u64))]
        }
        RetrainProgress::Training { kind, line } => {
            let Some(pr) = crate::web::data::TrainingProgress::of_line(line) else { return Vec::new() };
            let fraction = if pr.total > 0.0 { (pr.done / pr.total).clamp(0.0, 1.0) } else { 1.0 };
            let last = shown.0.get(kind.as_str()).copied();
            if last.is_some_and(|l| fraction < 1.0 && fraction - l < 0.1) {
                return Vec::new();
            }
            shown.0.insert(kind.as_str(), fraction);
            let unit = crate::web::data::TrainingProgress::unit(line);
            let rate = if unit == "steps" && pr.steps_per_s > 0.0 {
                format!(", {} steps/s", count(pr.steps_per_s.round() as u64))
            } else {
                String::new()
            };
            vec![format!(
                "{}: {} of {} {unit} ({:.0}%){rate}, eta {}",
                kind.as_str(),
                count(pr.done.max(0.0) as u64),
                count(pr.total.max(0.0) as u64),
                fraction * 100.0,
                crate::domain::duration_words(pr.eta_secs)
            )]
        }
        RetrainProgress::Evaluating { kind, candidate } => {
            vec![format!("{}: backtesting {candidate} and the champion on the holdout", kind.as_str())]
        }
        RetrainProgress::Finished(r) => {
            let mut out = vec![format!("{}: {} — {}", r.kind.as_str(), r.outcome.as_str(), r.reason())];
            if let Some(d) = &r.decision {
                out.push(format!("  gate: {}", crate::retrain::gate::numbers_line(&d.numbers)));
            }
            out.extend(
                r.candidates
                    .iter()
                    .filter_map(|c| c.warm_start.as_ref())
                    .map(|w| format!("  candidate {}", w.describe())),
            );
            out.push(match (&r.champion_before, &r.champion_after) {
                (b, a) if b != a => {
                    format!("  champion: {} -> {}", b.as_deref().unwrap_or("none"), a.as_deref().unwrap_or("none"))
                }
                (b, _) => format!("  champion: {} (unchanged)", b.as_deref().unwrap_or("none")),
            });
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::models::ModelKind;
    use crate::retrain::RetrainProgress;

    /// Issue 36: the foreground retrain speaks as the daemon does: progress as done of total with the
    /// rate and ETA (not the child's `approx_kl=… ` keys, no JSON `metrics={…}`), a line each tenth, and
    /// the gate's decision in the summary's words.
    #[test]
    fn the_foreground_retrain_shows_progress_and_the_gate_in_the_daemons_words() {
        let mut shown = super::Shown::default();
        let step = |steps: u64| RetrainProgress::Training {
            kind: ModelKind::Ppo,
            line: serde_json::json!({"event": "progress", "update": 1, "env_steps": steps, "total_steps": 32768,
                "approx_kl": 0.0072, "clip_fraction": 0.1, "steps_per_s": 1234.4, "eta_secs": 13.2}),
        };
        assert_eq!(
            super::lines(&step(16384), &mut shown),
            vec!["ppo: 16,384 of 32,768 steps (50%), 1,234 steps/s, eta 13s"]
        );
        assert!(super::lines(&step(17000), &mut shown).is_empty(), "not a tenth further");
        assert_eq!(super::lines(&step(32768), &mut shown).len(), 1, "the end is always said");
        let done = RetrainProgress::Training {
            kind: ModelKind::Ppo,
            line: serde_json::json!({"event": "done", "model_id": "ppo-1", "metrics": {"updates": 2, "approx_kl": 0.0072}}),
        };
        assert!(super::lines(&done, &mut shown).is_empty(), "the record says the outcome");
        let mut r: crate::retrain::RunRecord = serde_json::from_value(serde_json::json!({
            "id": "ppo-x", "kind": "ppo", "trigger": "command line", "clock_time": "2012-03-02T05:00:00Z",
            "started_at": "2012-03-02T05:00:00Z", "ended_at": "2012-03-02T05:01:00Z", "outcome": "kept",
            "failure": null, "snapshot": null, "candidate": "ppo-1", "champion_before": "ppo-0",
            "champion_after": "ppo-0", "train_metrics": {}, "candidate_metrics": null, "champion_metrics": null,
            "decision": {"promote": false, "reason": "candidate return 15.9% trails buy-and-hold's 34.4% by more than 5.0 points",
                "numbers": {"candidate_return": 0.159, "candidate_sharpe": 2.01, "champion_return": 0.237,
                    "champion_sharpe": 1.58, "buy_hold_return": 0.344}}
        }))
        .unwrap();
        let text = super::lines(&RetrainProgress::Finished(Box::new(r.clone())), &mut shown).join("\n");
        assert_eq!(
            text,
            "ppo: kept — candidate return 15.9% trails buy-and-hold's 34.4% by more than 5.0 points\n  \
             gate: candidate +15.9% (Sharpe 2.01); champion +23.7% (Sharpe 1.58); buy-and-hold +34.4%\n  \
             champion: ppo-0 (unchanged)"
        );
        assert!(!text.contains('=') && !text.contains('{'), "{text}");
        // How the candidate began (`retrain.warm_start`), in the daemon's words, before the champion.
        r.candidates = vec![
            serde_json::from_value(serde_json::json!({
                "algorithm": "ppo", "model_id": "ppo-1", "metrics": null, "decision": null, "failure": null,
                "warm_start": {"champion": "ppo-0", "warm": true, "reason": null}
            }))
            .unwrap(),
        ];
        let text = super::lines(&RetrainProgress::Finished(Box::new(r.clone())), &mut shown).join("\n");
        assert!(text.contains("\n  candidate warm-started from the champion ppo-0\n  champion: ppo-0"), "{text}");
        r.decision = None;
        assert!(!super::lines(&RetrainProgress::Finished(Box::new(r)), &mut shown).join("\n").contains("gate"));
    }
}
