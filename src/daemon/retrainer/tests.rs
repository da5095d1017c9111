//! The retrainer against a fake pipeline, driven by a `ManualClock` across Saturday 02:00 New York.

use super::*;
use crate::engine::ManualClock;
use crate::retrain::RunOutcome;
use chrono::TimeZone;
use std::sync::Mutex;
use tokio::sync::Semaphore;

type Calls = Arc<Mutex<Vec<(ModelKind, Trigger)>>>;

/// Runs only as far as its gate lets it; PPO runs are promoted (`ppo-new`), LSTM runs kept.
struct FakePipeline {
    calls: Calls,
    gate: Arc<Semaphore>,
}

fn record(kind: ModelKind, trigger: &Trigger) -> RunRecord {
    let promoted = kind == ModelKind::Ppo;
    let new = format!("{}-new", kind.as_str());
    RunRecord {
        id: format!("{}-run", kind.as_str()),
        kind,
        trigger: trigger.reason.clone(),
        clock_time: trigger.clock_time,
        started_at: Utc::now(),
        ended_at: Utc::now(),
        outcome: if promoted { RunOutcome::Promoted } else { RunOutcome::Kept },
        failure: None,
        snapshot: None,
        candidate: Some(new.clone()),
        champion_before: Some("old".into()),
        champion_after: Some(if promoted { new } else { "old".into() }),
        seed: None,
        train_metrics: Default::default(),
        trained_on: None,
        curves: Default::default(),
        candidate_metrics: None,
        champion_metrics: None,
        decision: None,
        candidates: Vec::new(),
    }
}

impl RunPipeline for FakePipeline {
    async fn run_once(
        &self,
        kind: ModelKind,
        trigger: Trigger,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> RunRecord {
        self.calls.lock().unwrap().push((kind, trigger.clone()));
        self.gate.acquire().await.unwrap().forget();
        progress(RetrainProgress::Snapshot { kind, bars: 1 });
        let r = record(kind, &trigger);
        // As the real pipeline does: its end as progress too (the CLI's `retrain` prints it).
        progress(RetrainProgress::Finished(Box::new(r.clone())));
        r
    }
}

fn utc(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, d, h, m, 0).unwrap()
}

fn retrainer(enabled: bool) -> (Retrainer<FakePipeline>, Calls, Arc<Semaphore>) {
    let (calls, gate) = (Calls::default(), Arc::new(Semaphore::new(0)));
    let fake = FakePipeline { calls: calls.clone(), gate: gate.clone() };
    let schedule = Schedule::parse(Schedule::DEFAULT_SPEC, Schedule::DEFAULT_ZONE).unwrap();
    (Retrainer::new(fake, schedule, enabled, tokio::runtime::Handle::current()), calls, gate)
}

async fn until_idle(r: &mut Retrainer<FakePipeline>) -> Vec<RetrainEvent> {
    let mut events = Vec::new();
    while let Some(e) = r.recv().await {
        let idle = e == RetrainEvent::Idle;
        events.push(e);
        if idle {
            break;
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_saturday_two_am_new_york_retrains_once_and_reports_the_swap() {
    let (mut r, calls, gate) = retrainer(true);
    let (ptx, mut prx) = mpsc::unbounded_channel();
    r = r.with_progress(ptx);
    // Friday 2026-01-09 16:00 New York (21:00 UTC): the baseline.
    let clock = ManualClock::new(utc(9, 21, 0));
    assert!(!r.on_clock(&clock), "the first reading only sets the baseline");
    assert_eq!(r.next_due(), Some(utc(10, 7, 0)));
    clock.set(utc(10, 6, 59)); // Saturday 01:59 New York
    assert!(!r.on_clock(&clock));
    clock.set(utc(10, 7, 0)); // Saturday 02:00 New York (EST)
    assert!(r.on_clock(&clock), "the schedule fired");
    assert!(r.is_running());
    // Never two at a time: a manual request and the next Saturday's run both find it busy.
    assert_eq!(r.request(Some(ModelKind::Lstm), "control socket", &clock), Err(Busy));
    let later = ManualClock::new(utc(17, 7, 30));
    assert!(!r.on_clock(&later), "skipped while the first run holds");
    assert!(r.poll().is_empty(), "the fake is held at its gate");

    gate.add_permits(10);
    let events = until_idle(&mut r).await;
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0].swap(), Some((ModelKind::Ppo, "ppo-new")), "the engine hot-swaps the new PPO champion");
    assert_eq!(events[1].swap(), None, "the LSTM candidate was kept");
    assert!(!r.is_running());
    {
        let calls = calls.lock().unwrap();
        let kinds: Vec<ModelKind> = calls.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, vec![ModelKind::Ppo, ModelKind::Lstm]);
        assert!(calls.iter().all(|(_, t)| t.clock_time == utc(10, 7, 0) && t.reason.contains("0 2 * * Sat")));
    }
    assert!(
        matches!(prx.try_recv(), Ok(RetrainProgress::Snapshot { kind: ModelKind::Ppo, .. })),
        "progress is streamed"
    );
    // A run's end travels once, on the events channel (above), never also as progress.
    let rest: Vec<RetrainProgress> = std::iter::from_fn(|| prx.try_recv().ok()).collect();
    assert!(matches!(rest.as_slice(), [RetrainProgress::Snapshot { kind: ModelKind::Lstm, .. }]), "{rest:?}");

    // Idle again: a manual request runs only the asked kind.
    assert_eq!(r.request(Some(ModelKind::Lstm), "control socket", &later), Ok(()));
    let events = until_idle(&mut r).await;
    assert_eq!(events.len(), 2, "{events:?}");
    let last = calls.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (last.0, last.1.reason.as_str(), last.1.clock_time),
        (ModelKind::Lstm, "control socket", utc(17, 7, 30))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_or_not_yet_due_never_starts() {
    let (mut r, calls, _gate) = retrainer(false);
    let clock = ManualClock::new(utc(9, 21, 0));
    r.on_clock(&clock);
    clock.set(utc(12, 21, 0));
    assert!(!r.on_clock(&clock), "retrain.enabled = false");
    assert_eq!(r.next_due(), None);

    let (mut r, calls2, _gate) = retrainer(true);
    clock.set(utc(10, 7, 0));
    r.on_clock(&clock);
    clock.set(utc(10, 6, 0));
    assert!(!r.on_clock(&clock), "a clock going back starts nothing");
    clock.set(utc(16, 21, 0));
    assert!(!r.on_clock(&clock), "Saturday 02:00 of the 10th was before the baseline; the 17th is not yet here");
    assert!(calls.lock().unwrap().is_empty() && calls2.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_due_inside_a_session_waits_for_its_close_on_the_calendar() {
    let (calls, gate) = (Calls::default(), Arc::new(Semaphore::new(10)));
    let fake = FakePipeline { calls: calls.clone(), gate };
    // Wednesdays at noon New York: inside the session.
    let schedule = Schedule::parse("0 12 * * Wed", Schedule::DEFAULT_ZONE).unwrap();
    let mut r =
        Retrainer::new(fake, schedule, true, tokio::runtime::Handle::current()).with_kinds(vec![ModelKind::Ppo]);
    r.set_calendar(Some(crate::calendar::Calendar::shipped()));
    // Wednesday 2026-01-07, EST: 11:00 New York is 16:00 UTC.
    let clock = ManualClock::new(utc(7, 16, 0));
    r.on_clock(&clock);
    clock.set(utc(7, 17, 0)); // 12:00: due, the market is open
    assert!(!r.on_clock(&clock), "waits for the close");
    clock.set(utc(7, 20, 59)); // 15:59
    assert!(!r.on_clock(&clock), "still open");
    clock.set(utc(7, 21, 0)); // 16:00: closed
    assert!(r.on_clock(&clock), "runs at the close");
    until_idle(&mut r).await;
    let got = calls.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert!(got[0].1.reason.contains("at 2026-01-07 17:00:00 UTC"), "{}", got[0].1.reason);
    assert_eq!(got[0].1.clock_time, utc(7, 21, 0));
    // Without a calendar (crypto only) the same schedule runs when due.
    let (calls, gate) = (Calls::default(), Arc::new(Semaphore::new(10)));
    let schedule = Schedule::parse("0 12 * * Wed", Schedule::DEFAULT_ZONE).unwrap();
    let mut r = Retrainer::new(FakePipeline { calls, gate }, schedule, true, tokio::runtime::Handle::current());
    let clock = ManualClock::new(utc(7, 16, 0));
    r.on_clock(&clock);
    clock.set(utc(7, 17, 0));
    assert!(r.on_clock(&clock), "no calendar, no wait");
}
