//! How a search ranks its trials, proposes the next one's parameters from them, and reports a trial's end.

use super::{space, tpe};
use crate::config::SamplerKind;
use crate::retrain::study_record::{StudyRecord, TrialRecord};
use crate::training;

/// The next trial's parameters: random, or TPE over the trials judged so far, best first.
pub(super) fn propose(tune: &crate::config::TuneConfig, study: &StudyRecord, number: usize) -> space::Params {
    let space = tune.space();
    match tune.sampler {
        SamplerKind::Random => space::random(&space, tune.seed, number),
        SamplerKind::Tpe => {
            let mut judged: Vec<&TrialRecord> = study.trials.iter().filter(|t| !t.curve.is_empty()).collect();
            judged.sort_by(|a, b| if better(a, b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
            let ranked: Vec<&space::Params> = judged.iter().map(|t| &t.params).collect();
            tpe::propose(&space, &ranked, tune.seed, number, tune.startup_trials)
        }
    }
}

/// Whether `a` ranks above `b`: further along, then a higher value, then the lower number.
pub(super) fn better(a: &TrialRecord, b: &TrialRecord) -> bool {
    let (ka, kb) = (a.rank_key(), b.rank_key());
    ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then(b.number.cmp(&a.number)).is_gt()
}

/// A trial's end, with the steps it trained; `rung` (its last rung in steps, the trial's envs and
/// `ppo.n_steps`) says why they exceed the rung when they do (whole updates).
pub(super) fn log_end(study: &StudyRecord, t: &TrialRecord, rung: Option<(u64, usize, usize)>) {
    match &t.error {
        Some(e) => log::warn!("study {}: trial {} failed: {e}", study.name, t.number),
        None => log::info!("study {}: {}", study.name, end_line(study, t, rung)),
    }
}

/// "trial 0 complete at 65,536 steps (the rung of 49,152 steps rounds up to …): sharpe 0.812".
pub(super) fn end_line(study: &StudyRecord, t: &TrialRecord, rung: Option<(u64, usize, usize)>) -> String {
    let value = t.value().map_or("no value".into(), |v| format!("{} {v:.3}", study.metric));
    let steps = t.curve.last().map_or(0, |r| r.steps);
    let why = rung
        .filter(|(r, _, _)| steps > *r)
        .map(|(r, envs, n)| {
            let (updates, _, _) = training::whole_updates(r, envs, n);
            format!(
                " (the {}-step rung rounds up to {updates} whole update{} of {}: {envs} envs × {n} steps)",
                crate::domain::count(r),
                if updates == 1 { "" } else { "s" },
                crate::domain::count((envs * n) as u64)
            )
        })
        .unwrap_or_default();
    format!("trial {} {} at {} steps{why}: {value}", t.number, t.state.as_str(), crate::domain::count(steps))
}
