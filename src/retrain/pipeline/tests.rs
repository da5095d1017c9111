//! The pipeline against fake training children (shell scripts) and a fake evaluator: a failure never
//! touches the champion and is recorded; a gate pass promotes; a gate fail keeps the champion and says why.

use super::*;
use crate::config::TrainConfig;
use crate::retrain::record;
use crate::retrain::testkit::{FakeEvaluator, done_line, registry_with_champion, spec, store_with_bars};
use chrono::{NaiveDate, TimeZone};
use std::time::Duration;

struct Run {
    record: RunRecord,
    progress: Vec<RetrainProgress>,
    champion_now: Option<String>,
    stored: Vec<RunRecord>,
}

async fn run_with(dir: &std::path::Path, script: &str, budget_ms: u64, ev: Arc<FakeEvaluator>) -> Run {
    let store = store_with_bars(dir);
    let p = RetrainPipeline::new(spec(dir, script, Duration::from_millis(budget_ms)), store.clone(), ev);
    let clock_time = Utc.with_ymd_and_hms(2010, 12, 11, 7, 0, 0).unwrap();
    let mut progress = Vec::new();
    let record = p.run(ModelKind::Ppo, Trigger { reason: "test".into(), clock_time }, &mut |e| progress.push(e)).await;
    let reg = Registry::open(&dir.join("models")).unwrap();
    let champion_now = reg.champion(ModelKind::Ppo).unwrap().map(|m| m.id);
    let stored = record::list(&store).unwrap();
    Run { record, progress, champion_now, stored }
}

fn assert_failed_and_kept(run: &Run, champ: &str, code: &str) {
    let r = &run.record;
    assert_eq!(r.outcome, RunOutcome::Failed, "{r:?}");
    assert_eq!(r.failure.as_ref().map(|f| f.code.as_str()), Some(code), "{r:?}");
    assert_eq!(run.champion_now.as_deref(), Some(champ), "a failed run must leave the champion");
    assert_eq!(r.champion_after.as_deref(), Some(champ));
    assert_eq!(run.stored, vec![r.clone()], "the failure is stored");
    assert!(matches!(run.progress.last(), Some(RetrainProgress::Finished(f)) if **f == *r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_child_leaves_the_champion_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, _) = registry_with_champion(dir.path(), ModelKind::Ppo);
    let ev = Arc::new(FakeEvaluator::default());
    let run = run_with(dir.path(), r#"echo '{"event":"progress","steps":64}'; kill -9 $$"#, 10_000, ev.clone()).await;
    assert_failed_and_kept(&run, &champ, "crash");
    assert!(run.record.reason().contains("train failed (crash)"), "{}", run.record.reason());
    assert!(
        run.progress.iter().any(|p| matches!(p, RetrainProgress::Training { line, .. } if line["steps"] == 64)),
        "the child's progress is streamed"
    );
    assert!(ev.calls.lock().unwrap().is_empty(), "nothing to evaluate after a crash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nan_loss_and_timeout_are_failures_too() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, _) = registry_with_champion(dir.path(), ModelKind::Ppo);
    let nan = r#"echo '{"event":"error","message":"loss is NaN at update 7"}'; exit 1"#;
    let run = run_with(dir.path(), nan, 10_000, Arc::default()).await;
    assert_failed_and_kept(&run, &champ, "reported");
    assert!(run.record.reason().contains("loss is NaN at update 7"), "{}", run.record.reason());

    let dir = tempfile::tempdir().unwrap();
    let (champ, _) = registry_with_champion(dir.path(), ModelKind::Ppo);
    let run = run_with(dir.path(), "sleep 30", 300, Arc::default()).await;
    assert_failed_and_kept(&run, &champ, "timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lstm_with_too_little_data_is_recorded_as_skipped_with_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, _) = registry_with_champion(dir.path(), ModelKind::Lstm);
    let message = "not enough data for the LSTM: 120 labelled samples (40 per symbol over 300 days), need 300: import more history";
    let script = format!(r#"echo '{{"event":"error","message":"{message}"}}'; exit 1"#);
    let store = store_with_bars(dir.path());
    let p = RetrainPipeline::new(
        spec(dir.path(), &script, Duration::from_secs(10)),
        store.clone(),
        Arc::new(FakeEvaluator::default()),
    );
    let clock_time = Utc.with_ymd_and_hms(2010, 12, 11, 7, 0, 0).unwrap();
    let r = p.run(ModelKind::Lstm, Trigger { reason: "test".into(), clock_time }, &mut |_| {}).await;
    assert_eq!(r.outcome, RunOutcome::Skipped, "{r:?}");
    let f = r.failure.as_ref().unwrap();
    assert_eq!((f.code.as_str(), f.message.as_str()), ("not_enough_data", message));
    assert_eq!(r.reason(), format!("skipped: {message}"));
    assert_eq!(r.champion_after.as_deref(), Some(champ.as_str()), "the champion stays");
    assert_eq!(record::list(&store).unwrap(), vec![r.clone()], "the skip is stored");
    assert_eq!(r.to_status().outcome, "skipped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_pass_promotes_and_records_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, cand) = registry_with_champion(dir.path(), ModelKind::Ppo);
    // The child checks what it is given: the arguments and a readable snapshot of the window.
    let script = format!(
        r#"[ "$1 $2 $3" = "train ppo --config" ] || exit 3; [ "$5 $6 $7" = "--json --steps 1000" ] || exit 4
test -s "$TRADEBOT_TRAIN_SNAPSHOT" || exit 5
echo '{{"event":"progress","steps":500,"mean_return":0.5}}'
echo '{{"event":"progress","steps":1000,"mean_return":0.75,"policy_loss":-0.01}}'; {}"#,
        done_line(&cand)
            .replace(r#""metrics""#, r#""device":"cpu","env":"VecEnv","device_requested":"auto","metrics""#)
    );
    let ev = Arc::new(FakeEvaluator::with(&[(&cand, 1.5), (&champ, 1.0)]));
    let run = run_with(dir.path(), &script, 10_000, ev.clone()).await;
    let r = &run.record;
    assert_eq!(r.outcome, RunOutcome::Promoted, "{r:?}");
    assert_eq!(run.champion_now.as_deref(), Some(cand.as_str()));
    assert_eq!(r.new_champion(), Some(cand.as_str()));
    assert_eq!(r.champion_before.as_deref(), Some(champ.as_str()));
    let d = r.decision.as_ref().unwrap();
    assert!(d.promote && d.reason.contains("beats"), "{d:?}");
    assert_eq!((d.numbers["candidate_sharpe"], d.numbers["champion_sharpe"]), (1.5, 1.0));
    assert_eq!(r.train_metrics["mean_return"], 1.5);
    // Where the child trained, as its done line says.
    let on = r.trained_on.as_ref().expect("the done line names the device and env");
    assert_eq!((on.device.as_str(), on.env.as_str(), on.requested.as_str()), ("cpu", "VecEnv", "auto"));
    // The progress lines' curves are kept in the record, each from the lines that carry it.
    assert_eq!(r.curves["return"], vec![0.5, 0.75]);
    assert_eq!(r.curves["policy_loss"], vec![-0.01]);
    assert_eq!(run.stored.iter().find(|x| x.id == r.id).map(|x| x.curves.clone()), Some(r.curves.clone()));
    assert_eq!(*ev.calls.lock().unwrap(), vec![cand.clone(), champ.clone()]);
    // The snapshot holds the window cut at the training end (30 of the 40 stored bars are in November).
    let snap = r.snapshot.as_ref().unwrap();
    assert_eq!(snap.bars, 30, "{snap:?}");
    let read = crate::data::snapshot::Snapshot::read(std::path::Path::new(&snap.path)).unwrap();
    assert_eq!(read.series[0].1.len(), 30);
    // The record names the data it used: the snapshot's first and last bar, the last one the newest stored
    // bar inside the window.
    let window_last = read.series.iter().filter_map(|(_, b)| b.last()).map(|b| b.t).max();
    assert_eq!(snap.last_bar, window_last);
    assert!(snap.last_bar.unwrap() <= snap.to.unwrap() && snap.first_bar.unwrap() >= snap.from.unwrap());
    assert_eq!(run.stored, vec![r.clone()]);
    assert_eq!(r.to_status().outcome, "promoted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_fail_keeps_the_champion_and_records_why() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, cand) = registry_with_champion(dir.path(), ModelKind::Ppo);
    let ev = Arc::new(FakeEvaluator::with(&[(&cand, 1.05), (&champ, 1.0)]));
    let run = run_with(dir.path(), &done_line(&cand), 10_000, ev).await;
    let r = &run.record;
    assert_eq!(r.outcome, RunOutcome::Kept, "{r:?}");
    assert_eq!(run.champion_now.as_deref(), Some(champ.as_str()));
    assert_eq!(r.new_champion(), None);
    assert!(r.reason().contains("does not beat the champion's 1.000 by the margin 0.100"), "{}", r.reason());
    assert_eq!(run.stored[0].decision.as_ref().map(|d| d.numbers["candidate_sharpe"]), Some(1.05));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_or_a_failed_backtest_keeps_the_champion() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, cand) = registry_with_champion(dir.path(), ModelKind::Ppo);
    let run = run_with(dir.path(), &done_line("ppo-0000000000000000"), 10_000, Arc::default()).await;
    assert_failed_and_kept(&run, &champ, "registry");

    let dir = tempfile::tempdir().unwrap();
    let (champ2, cand2) = registry_with_champion(dir.path(), ModelKind::Ppo);
    assert_eq!((&champ2, &cand2), (&champ, &cand), "content-addressed ids");
    // The candidate backtests but the champion does not: no decision on half the numbers.
    let ev = Arc::new(FakeEvaluator::with(&[(&cand, 3.0)]));
    let run = run_with(dir.path(), &done_line(&cand), 10_000, ev).await;
    assert_failed_and_kept(&run, &champ, "evaluate");
    assert!(run.record.reason().contains(&format!("no backtest for {champ}")), "{}", run.record.reason());
}

#[test]
fn the_window_never_passes_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(dir.path(), "", Duration::from_secs(1));
    let early = Utc.with_ymd_and_hms(2010, 11, 10, 7, 0, 0).unwrap();
    assert_eq!(s.window(early).1, early, "a replay at {early} must not train on later bars");
    let late = Utc.with_ymd_and_hms(2011, 6, 1, 7, 0, 0).unwrap();
    assert!(s.window(late).1 < crate::data::daily_bar_time(NaiveDate::from_ymd_opt(2010, 12, 1).unwrap()));
}

#[test]
fn a_rolling_window_moves_with_the_clock_and_reaches_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(dir.path(), "", Duration::from_secs(1));
    s.train = TrainConfig {
        from: None,
        to: None,
        holdout_from: None,
        holdout_to: None,
        checkpoint_every: 10,
        rolling: Some(crate::config::Rolling { window_days: 100, holdout_days: 10 }),
    };
    let now = Utc.with_ymd_and_hms(2012, 7, 2, 6, 0, 0).unwrap();
    let (from, to) = s.window(now);
    // Holdout 2012-06-23 ..= 2012-07-02; training the 100 days before it.
    assert_eq!(from, crate::data::daily_bar_time(NaiveDate::from_ymd_opt(2012, 3, 15).unwrap()));
    assert!(to < crate::data::daily_bar_time(NaiveDate::from_ymd_opt(2012, 6, 23).unwrap()));
    assert!(to > crate::data::daily_bar_time(NaiveDate::from_ymd_opt(2012, 6, 22).unwrap()));
    let later = s.window(now + chrono::Duration::days(7));
    assert_eq!(later.0 - from, chrono::Duration::days(7), "a week later the window moved a week");
    // An LSTM's data reaches back lstm.history_days (here 365) before the training end, 2012-06-22.
    s.lstm_history_days = 365;
    assert_eq!(s.data_window(ModelKind::Ppo, now), (from, to));
    let lstm_from = crate::data::daily_bar_time(NaiveDate::from_ymd_opt(2011, 6, 24).unwrap());
    assert_eq!(s.data_window(ModelKind::Lstm, now), (lstm_from, to));
    let seed = crate::config::retrain_seed(now.date_naive());
    let child = s.child_spec(ModelKind::Ppo, Algorithm::Ppo, std::path::Path::new("/tmp/x"), (now, seed), None);
    assert!(
        child.env.iter().any(|(k, v)| k == crate::config::AS_OF_ENV && v == "2012-07-02"),
        "the child resolves the window on the engine's day: {:?}",
        child.env
    );
    // Each retrain seeds by its day: a week later, another seed; the same day, the same one.
    assert!(child.env.iter().any(|(k, v)| k == crate::config::SEED_ENV && v.to_str() == Some(&seed.to_string())));
    let week_later = crate::config::retrain_seed((now + chrono::Duration::days(7)).date_naive());
    assert_ne!(week_later, seed);
    assert_eq!(crate::config::retrain_seed(now.date_naive()), seed);
    assert!(seed <= i64::MAX as u64, "libtorch takes a signed seed");
    // Its own memory limit: three quarters of the machine by default, passed to it; 0 means none.
    let mem = crate::retrain::memory::MEMORY_ENV;
    assert_eq!(Some(child.memory_mb), crate::retrain::memory::default_budget_mb());
    assert!(child.env.iter().any(|(k, v)| k == mem && v.to_str() == Some(child.memory_mb.to_string().as_str())));
    s.retrain.memory_mb = Some(0);
    let child = s.child_spec(ModelKind::Ppo, Algorithm::Ppo, std::path::Path::new("/tmp/x"), (now, seed), None);
    assert_eq!(child.memory_mb, 0);
    assert!(!child.env.iter().any(|(k, _)| k == mem));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dropped_mid_training_is_recorded_interrupted_with_when_not_left_running() {
    let dir = tempfile::tempdir().unwrap();
    registry_with_champion(dir.path(), ModelKind::Ppo);
    let store = store_with_bars(dir.path());
    let ev: Arc<FakeEvaluator> = Arc::default();
    let p = RetrainPipeline::new(spec(dir.path(), "sleep 30", Duration::from_secs(60)), store.clone(), ev);
    let clock_time = Utc.with_ymd_and_hms(2010, 12, 11, 7, 0, 0).unwrap();
    let mut progress = Vec::new();
    let mut report = |e| progress.push(e);
    let run = p.run(ModelKind::Ppo, Trigger { reason: "test".into(), clock_time }, &mut report);
    // The daemon's runtime shutting down (SIGTERM) drops the run's future while the child trains.
    assert!(tokio::time::timeout(Duration::from_millis(700), run).await.is_err(), "the child sleeps 30 s");
    let stored = record::list(&store).unwrap();
    assert_eq!(stored.len(), 1, "{stored:?}");
    let r = &stored[0];
    assert_eq!(r.outcome, RunOutcome::Interrupted, "recorded at shutdown, not at the next retrain: {r:?}");
    assert!(r.ended_at > r.started_at, "{r:?}");
    let when = r.ended_at.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    assert!(r.reason().contains(&format!("stopped at {when}")), "{}", r.reason());
}

/// A PPO run with `script` as its child and `warm_start` as configured; the child's arguments as it saw them.
async fn warm_run(
    dir: &std::path::Path,
    script: &str,
    warm: bool,
    ev: Arc<FakeEvaluator>,
) -> (RunRecord, String, RunRecord) {
    let args = dir.join("child-args");
    let script = format!("echo \"$@\" > {}; {script}", args.display());
    let mut s = spec(dir, &script, Duration::from_secs(10));
    s.retrain.warm_start = warm;
    let store = store_with_bars(dir);
    let p = RetrainPipeline::new(s, store.clone(), ev);
    let clock_time = Utc.with_ymd_and_hms(2010, 12, 11, 7, 0, 0).unwrap();
    let r = p.run(ModelKind::Ppo, Trigger { reason: "test".into(), clock_time }, &mut |_| {}).await;
    let stored = record::list(&store).unwrap().remove(0);
    (r, std::fs::read_to_string(args).unwrap_or_default(), stored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ppo_retrain_starts_from_the_champion_and_records_how_its_candidate_began() {
    use crate::retrain::WarmStart;
    let dir = tempfile::tempdir().unwrap();
    let (champ, cand) = registry_with_champion(dir.path(), ModelKind::Ppo);
    let ev = Arc::new(FakeEvaluator::with(&[(&champ, 1.0), (&cand, 0.5)]));
    // The child answers as `tradebot train ppo --warm-start` does when the champion's state cannot be used.
    let why = format!("model {champ} has no training state");
    let done = format!(
        r#"echo '{{"event":"done","model_id":"{cand}","warm_start":{{"champion":"{champ}","warm":false,"reason":"{why}"}}}}'"#
    );
    let (r, args, stored) = warm_run(dir.path(), &done, true, ev).await;
    assert!(args.contains("train ppo") && args.contains(&format!("--warm-start {champ}")), "{args}");
    assert_eq!(r.candidates[0].warm_start, Some(WarmStart::scratch(Some(champ.clone()), why)), "{r:?}");
    assert_eq!(stored.candidates, r.candidates, "stored with the run");

    // retrain.warm_start = false: no flag, nothing to record.
    let dir = tempfile::tempdir().unwrap();
    let (champ, cand) = registry_with_champion(dir.path(), ModelKind::Ppo);
    let ev = Arc::new(FakeEvaluator::with(&[(&champ, 1.0), (&cand, 0.5)]));
    let (r, args, _) = warm_run(dir.path(), &done_line(&cand), false, ev).await;
    assert!(args.contains("train ppo") && !args.contains("--warm-start"), "{args}");
    assert_eq!(r.candidates[0].warm_start, None);

    // No champion: from scratch, and the record says so.
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(&dir.path().join("models")).unwrap();
    let cand = reg.add(b"candidate bytes", crate::retrain::testkit::draft(ModelKind::Ppo)).unwrap().id;
    let ev = Arc::new(FakeEvaluator::with(&[(&cand, 0.5)]));
    let (r, args, _) = warm_run(dir.path(), &done_line(&cand), true, ev).await;
    assert!(!args.contains("--warm-start"), "{args}");
    let w = r.candidates[0].warm_start.clone().unwrap();
    assert_eq!(w, WarmStart::scratch(None, "no ppo champion to start from"));
    assert_eq!(w.describe(), "trained from scratch: no ppo champion to start from");
}

/// A SAC candidate (`retrain.algorithms = ["sac"]`) starts from a SAC champion (`train sac --warm-start`),
/// and beside a PPO champion trains from scratch, its record saying why: a PPO policy's state is no SAC's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sac_candidate_starts_from_a_sac_champion_only() {
    use crate::models::Algorithm;
    use crate::retrain::WarmStart;
    let sac_run = |dir: &std::path::Path, champion_algorithm: Algorithm| {
        let reg = Registry::open(&dir.join("models")).unwrap();
        let draft = |a| crate::models::Manifest { algorithm: a, ..crate::retrain::testkit::draft(ModelKind::Ppo) };
        let champ = reg.add(b"champion bytes", draft(champion_algorithm)).unwrap().id;
        reg.promote(&champ, "seed").unwrap();
        let cand = reg.add(b"candidate bytes", draft(Algorithm::Sac)).unwrap().id;
        let args = dir.join("child-args");
        let mut s =
            spec(dir, &format!("echo \"$@\" > {}; {}", args.display(), done_line(&cand)), Duration::from_secs(10));
        s.retrain.algorithms = vec![Algorithm::Sac];
        let ev = Arc::new(FakeEvaluator::with(&[(&champ, 1.0), (&cand, 0.5)]));
        let p = RetrainPipeline::new(s, store_with_bars(dir), ev);
        (p, champ, args)
    };
    let clock_time = Utc.with_ymd_and_hms(2010, 12, 11, 7, 0, 0).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (p, champ, args) = sac_run(dir.path(), Algorithm::Sac);
    p.run(ModelKind::Ppo, Trigger { reason: "test".into(), clock_time }, &mut |_| {}).await;
    let args = std::fs::read_to_string(args).unwrap();
    assert!(args.contains("train sac") && args.contains(&format!("--warm-start {champ}")), "{args}");

    let dir = tempfile::tempdir().unwrap();
    let (p, champ, args) = sac_run(dir.path(), Algorithm::Ppo);
    let r = p.run(ModelKind::Ppo, Trigger { reason: "test".into(), clock_time }, &mut |_| {}).await;
    let args = std::fs::read_to_string(args).unwrap();
    assert!(args.contains("train sac") && !args.contains("--warm-start"), "{args}");
    let why = format!("the champion {champ} is not a sac policy");
    assert_eq!(r.candidates[0].warm_start, Some(WarmStart::scratch(None, why)), "{r:?}");
}
