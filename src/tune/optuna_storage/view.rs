//! A study in Optuna's storage as our record, for `tradebot tune list|show --storage URL`: its trials read
//! with [`mapping::trial_record`], the best trial as Optuna names it, the candidate registered from it
//! where a tradebot worker trained it (the study's `tradebot:model:N` system attribute).

use super::messages as m;
use super::{Client, StorageError, WORKER_ATTR, mapping};
use crate::config::TuneConfig;
use crate::retrain::study_record::StudyRecord;
use serde_json::Value;

/// The study system attribute with the search's settings (metric, rungs, sampler, trials).
pub(crate) const SETTINGS_ATTR: &str = "tradebot:settings";
/// `tradebot:model:N`: the study system attribute naming the candidate registered from trial N.
pub(crate) const MODEL_ATTR_PREFIX: &str = "tradebot:model:";

/// Every study in the storage, most recent first.
pub(crate) fn list(url: &str, tune: &TuneConfig) -> Result<Vec<StudyRecord>, StorageError> {
    let client = Client::new(url)?;
    let mut out = Vec::new();
    for s in client.studies()? {
        let trials = client.trials(s.study_id)?;
        out.push(with_settings(record_of(&s.study_name, tune, &trials), &s.system_attributes));
    }
    out.reverse();
    Ok(out)
}

/// The study named `name` (`latest`: the most recently created).
pub(crate) fn show(url: &str, name: &str, tune: &TuneConfig) -> Result<StudyRecord, StorageError> {
    let client = Client::new(url)?;
    let studies = client.studies()?;
    let found = if name == "latest" {
        studies.iter().max_by_key(|s| s.study_id)
    } else {
        studies.iter().find(|s| s.study_name == name)
    };
    let Some(s) = found else {
        let names: Vec<&str> = studies.iter().map(|s| s.study_name.as_str()).collect();
        return Err(StorageError::NotFound {
            url: url.into(),
            call: "study".into(),
            detail: format!(
                "no study {name:?} (there are: {}): `tradebot tune list --storage {url}`",
                names.join(", ")
            ),
        });
    };
    let trials = client.trials(s.study_id)?;
    Ok(with_settings(record_of(&s.study_name, tune, &trials), &s.system_attributes))
}

/// The record with the settings the study was created with, where a tradebot worker created it.
fn with_settings(mut r: StudyRecord, attrs: &std::collections::HashMap<String, String>) -> StudyRecord {
    r.model_id = r
        .best
        .and_then(|n| attrs.get(&format!("{MODEL_ATTR_PREFIX}{n}")))
        .and_then(|s| serde_json::from_str::<String>(s).ok());
    let Some(v) = attrs.get(SETTINGS_ATTR).and_then(|s| serde_json::from_str::<Value>(s).ok()) else {
        r.metric = "value".into();
        r.sampler = "optuna".into();
        return r;
    };
    if let Some(x) = v["metric"].as_str() {
        r.metric = x.into();
    }
    if let Some(x) = v["sampler"].as_str() {
        r.sampler = x.into();
    }
    if let Some(x) = v["seed"].as_u64() {
        r.seed = x;
    }
    if let Some(x) = v["trials"].as_u64() {
        r.trials_planned = x as usize;
    }
    if let Some(x) = v["reduction"].as_u64() {
        r.reduction = x;
    }
    if let Some(x) = v["rungs"].as_array() {
        r.rungs = x.iter().filter_map(Value::as_u64).collect();
    }
    r
}

/// The study as our record, from the storage's trials.
pub(crate) fn record_of(name: &str, tune: &TuneConfig, all: &[m::Trial]) -> StudyRecord {
    let best = mapping::best(all);
    // A best trial that no tradebot worker ran (a Python worker's) has no candidate: said, not "under way".
    let error = best.filter(|b| !b.system_attributes.contains_key(WORKER_ATTR)).map(|b| {
        format!("the study's best, trial {}, is not a tradebot worker's: no candidate is registered from it", b.number)
    });
    let mut trials: Vec<_> = all.iter().map(mapping::trial_record).collect();
    trials.sort_by_key(|t| t.number);
    StudyRecord {
        name: name.into(),
        trigger: "Optuna storage".into(),
        sampler: tune.sampler.as_str().into(),
        seed: tune.seed,
        metric: tune.metric.as_str().into(),
        space: tune.space(),
        rungs: tune.rungs(),
        reduction: tune.reduction,
        parallel: 1,
        trials_planned: tune.trials,
        validation_from: None,
        validation_to: None,
        started_at: trials.first().map_or_else(crate::clock::now, |t| t.started_at),
        ended_at: None,
        best: best.map(|b| b.number.max(0) as usize),
        trials,
        model_id: None,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::super::messages::state;
    use super::*;

    /// A complete trial with `value`; `ours`: run by a tradebot worker (its worker attribute).
    fn trial(number: i64, value: f64, ours: bool) -> m::Trial {
        let mut t = m::Trial {
            trial_id: number + 10,
            number,
            state: state::COMPLETE,
            values: vec![value],
            ..Default::default()
        };
        if ours {
            t.system_attributes.insert(WORKER_ATTR.into(), "\"host-1\"".into());
        }
        t
    }

    #[test]
    fn a_best_trial_no_tradebot_worker_ran_is_said_to_have_no_candidate() {
        let tune = TuneConfig::default();
        let r = record_of("s", &tune, &[trial(0, 0.5, true), trial(1, 0.9, false)]);
        assert_eq!(r.best, Some(1));
        let table = crate::tune::table(&r);
        assert!(table.contains("trial 1, is not a tradebot worker's") && !table.contains("under way"), "{table}");
        let r = record_of("s", &tune, &[trial(0, 0.5, true), trial(1, 0.4, false)]);
        assert_eq!((r.best, r.error), (Some(0), None));
    }
}
