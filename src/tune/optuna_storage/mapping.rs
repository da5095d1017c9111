//! Our parameters and trials in Optuna's terms and back: a `[tune.space]` range as Optuna's distribution JSON
//! (`FloatDistribution`, `IntDistribution`, `CategoricalDistribution`), a value as Optuna stores it (a
//! choice's index), an Optuna trial as our [`TrialRecord`] (its intermediate values, by step, as the curve),
//! and the study's search space checked against ours.

use super::messages::{self as m, state};
use crate::config::Dist;
use crate::retrain::study_record::{RungValue, TrialRecord, TrialState};
use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;

/// Optuna's JSON for a range (`optuna.distributions.distribution_to_json`).
pub(crate) fn distribution_json(d: &Dist) -> String {
    super::super::journal::distribution(d)
}

/// A distribution of Optuna's that is not one of tradebot's ranges (its JSON, and why).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{json}: {why}")]
pub(crate) struct DistError {
    pub json: String,
    pub why: String,
}

/// A range back from Optuna's distribution JSON; refused (saying what it is) where tradebot has no such range.
pub(crate) fn dist_from_json(s: &str) -> Result<Dist, DistError> {
    let err = |why: String| DistError { json: s.to_string(), why };
    let v: Value = serde_json::from_str(s).map_err(|e| err(format!("not a distribution's JSON: {e}")))?;
    let a = &v["attributes"];
    let num = |k: &str| a[k].as_f64().ok_or_else(|| err(format!("no number {k}")));
    let log = a["log"].as_bool().unwrap_or(false);
    match v["name"].as_str() {
        Some("FloatDistribution") if !a["step"].is_null() => Err(err("a float range with a step".into())),
        Some("FloatDistribution") if log => Ok(Dist::Log { low: num("low")?, high: num("high")? }),
        Some("FloatDistribution") => Ok(Dist::Linear { low: num("low")?, high: num("high")? }),
        Some("IntDistribution") if log || a["step"].as_i64().unwrap_or(1) != 1 => {
            Err(err("a whole-number range with a log scale or a step".into()))
        }
        Some("IntDistribution") => Ok(Dist::Int { low: num("low")? as i64, high: num("high")? as i64 }),
        Some("CategoricalDistribution") => {
            let values = a["choices"].as_array().ok_or_else(|| err("no choices".into()))?;
            let values: Option<Vec<f64>> = values.iter().map(Value::as_f64).collect();
            Ok(Dist::Choice { values: values.ok_or_else(|| err("choices that are not numbers".into()))? })
        }
        _ => Err(err("a distribution tradebot does not use".into())),
    }
}

/// A value as Optuna stores it (`to_internal_repr`): a choice's index, any other value as it is.
pub(crate) fn internal(d: &Dist, x: f64) -> f64 {
    super::super::space::to_internal_choice(d, x)
}

/// A value back from Optuna's internal form.
pub(crate) fn external(d: &Dist, x: f64) -> f64 {
    match d {
        Dist::Choice { values } => values.get(x as usize).copied().unwrap_or(f64::NAN),
        _ => x,
    }
}

/// Our space as the study's system attribute holds it: each range's distribution JSON by name.
pub(crate) fn space_attr(space: &BTreeMap<String, Dist>) -> Value {
    Value::Object(space.iter().map(|(k, d)| (k.clone(), Value::String(distribution_json(d)))).collect())
}

/// Where the study's search space and ours differ, each difference named; `stored` is the study's
/// `tradebot:space` attribute (JSON text) where a tradebot worker set one, and `trials` its trials (a Python
/// worker's parameters of the same name must have the same range).
pub(crate) fn space_conflicts(ours: &BTreeMap<String, Dist>, stored: Option<&str>, trials: &[m::Trial]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(stored) = stored {
        let theirs: BTreeMap<String, String> = match serde_json::from_str::<Value>(stored)
            .ok()
            .and_then(|v| serde_json::from_value::<BTreeMap<String, String>>(v).ok())
        {
            Some(t) => t,
            None => return vec![format!("its search space {stored} is not tradebot's (another version wrote it?)")],
        };
        for (name, d) in ours {
            match theirs.get(name).map(|j| dist_from_json(j)) {
                None => out.push(format!("{name} is in this search space but not in the study's")),
                Some(Ok(t)) if t == *d => {}
                Some(Ok(t)) => out.push(format!("{name} is {} here but {} in the study", show(d), show(&t))),
                Some(Err(e)) => out.push(format!("{name}: the study's range {e}")),
            }
        }
        for name in theirs.keys().filter(|n| !ours.contains_key(*n)) {
            out.push(format!("{name} is in the study's search space but not in this one"));
        }
    }
    for t in trials {
        for (name, j) in &t.distributions {
            let Some(d) = ours.get(name) else { continue };
            match dist_from_json(j) {
                Ok(t2) if t2 == *d => {}
                Ok(t2) => {
                    let why = format!("{name} is {} here but {} in the study's trial {}", show(d), show(&t2), t.number);
                    if !out.contains(&why) {
                        out.push(why);
                    }
                }
                Err(e) => out.push(format!("{name} in the study's trial {}: {e}", t.number)),
            }
        }
        if out.len() >= 5 {
            break;
        }
    }
    out
}

/// A range as `[tune.space]` writes it.
fn show(d: &Dist) -> String {
    match d {
        Dist::Log { low, high } => format!("log {low}..{high}"),
        Dist::Linear { low, high } => format!("linear {low}..{high}"),
        Dist::Int { low, high } => format!("int {low}..{high}"),
        Dist::Choice { values } => format!("choice {values:?}"),
    }
}

/// Our state for Optuna's (waiting trials are not started: running here).
pub(crate) fn trial_state(s: i32) -> TrialState {
    match s {
        state::COMPLETE => TrialState::Complete,
        state::PRUNED => TrialState::Pruned,
        state::FAIL => TrialState::Failed,
        _ => TrialState::Running,
    }
}

/// Optuna's time format, read as UTC (tradebot writes UTC; a Python worker its local time).
pub(crate) fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").ok().map(|t| t.and_utc())
}

/// An Optuna trial as our record: parameters in their own form (those of ranges tradebot cannot read are left
/// out), the intermediate values by step as the curve, a complete trial's value as its curve's last point,
/// the numeric user attributes as metrics (`seed` and `error` as such).
pub(crate) fn trial_record(t: &m::Trial) -> TrialRecord {
    let mut params = BTreeMap::new();
    for (name, x) in &t.params {
        if let Some(Ok(d)) = t.distributions.get(name).map(|j| dist_from_json(j)) {
            params.insert(name.clone(), external(&d, *x));
        }
    }
    let mut steps: Vec<(&i64, &f64)> = t.intermediate_values.iter().collect();
    steps.sort_by_key(|(s, _)| **s);
    let mut curve: Vec<RungValue> =
        steps.into_iter().map(|(s, v)| RungValue { steps: (*s).max(0) as u64, value: *v }).collect();
    if t.state == state::COMPLETE
        && let Some(&v) = t.values.first()
        && curve.last().is_none_or(|r| r.value != v)
    {
        let steps = curve.last().map_or(0, |r| r.steps);
        curve.push(RungValue { steps, value: v });
    }
    let attr = |k: &str| t.user_attributes.get(k).and_then(|s| serde_json::from_str::<Value>(s).ok());
    let metrics = t
        .user_attributes
        .iter()
        .filter_map(|(k, s)| Some((k.clone(), serde_json::from_str::<Value>(s).ok()?.as_f64()?)))
        .filter(|(k, _)| k != "seed")
        .collect();
    TrialRecord {
        number: t.number.max(0) as usize,
        state: trial_state(t.state),
        params,
        seed: attr("seed").and_then(|v| v.as_u64()).unwrap_or(0),
        curve,
        metrics,
        started_at: parse_time(&t.datetime_start).unwrap_or(DateTime::<Utc>::UNIX_EPOCH),
        ended_at: parse_time(&t.datetime_complete),
        error: attr("error").and_then(|v| v.as_str().map(String::from)),
    }
}

/// The best trial as Optuna names it (`study.best_trial`): the highest value among complete trials, the
/// first such trial on a tie.
pub(crate) fn best(trials: &[m::Trial]) -> Option<&m::Trial> {
    let mut best: Option<&m::Trial> = None;
    for t in trials.iter().filter(|t| t.state == state::COMPLETE) {
        let Some(&v) = t.values.first() else { continue };
        if best.and_then(|b| b.values.first()).is_none_or(|&b| v > b) {
            best = Some(t);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_round_trips_through_optunas_json() {
        for d in [
            Dist::Log { low: 1e-4, high: 3e-3 },
            Dist::Linear { low: 0.1, high: 0.3 },
            Dist::Int { low: 1, high: 3 },
            Dist::Choice { values: vec![8.0, 16.0] },
        ] {
            assert_eq!(dist_from_json(&distribution_json(&d)).unwrap(), d);
        }
        // As Python writes them.
        let py = r#"{"name": "CategoricalDistribution", "attributes": {"choices": [8, 16]}}"#;
        assert_eq!(dist_from_json(py).unwrap(), Dist::Choice { values: vec![8.0, 16.0] });
        let stepped =
            r#"{"name": "FloatDistribution", "attributes": {"low": 0, "high": 1, "log": false, "step": 0.1}}"#;
        assert!(dist_from_json(stepped).unwrap_err().to_string().contains("step"));
        let d = Dist::Choice { values: vec![8.0, 16.0] };
        assert_eq!((internal(&d, 16.0), external(&d, 1.0)), (1.0, 16.0));
    }

    #[test]
    fn a_conflicting_space_is_named_range_by_range() {
        let ours: BTreeMap<String, Dist> = [
            ("learning_rate".to_string(), Dist::Log { low: 1e-4, high: 3e-3 }),
            ("n_epochs".to_string(), Dist::Int { low: 1, high: 3 }),
        ]
        .into();
        let same = space_attr(&ours).to_string();
        assert!(space_conflicts(&ours, Some(&same), &[]).is_empty());
        let mut other = ours.clone();
        other.insert("n_epochs".into(), Dist::Int { low: 1, high: 5 });
        other.insert("gamma".into(), Dist::Linear { low: 0.9, high: 0.99 });
        let why = space_conflicts(&ours, Some(&space_attr(&other).to_string()), &[]).join("; ");
        assert!(why.contains("n_epochs is int 1..3 here but int 1..5 in the study"), "{why}");
        assert!(why.contains("gamma is in the study's search space but not in this one"), "{why}");
        // A Python worker's trial with a parameter of the same name and another range.
        let t = m::Trial {
            number: 4,
            distributions: [("learning_rate".to_string(), distribution_json(&Dist::Linear { low: 0.0, high: 1.0 }))]
                .into(),
            ..Default::default()
        };
        let why = space_conflicts(&ours, None, &[t]).join("; ");
        assert!(
            why.contains("learning_rate is log 0.0001..0.003 here but linear 0..1 in the study's trial 4"),
            "{why}"
        );
    }

    #[test]
    fn an_optuna_trial_reads_as_our_record_and_the_best_is_optunas() {
        let d = Dist::Choice { values: vec![8.0, 16.0] };
        let t = |number: i64, st: i32, v: Option<f64>| m::Trial {
            trial_id: number + 1,
            number,
            state: st,
            values: v.into_iter().collect(),
            datetime_start: "2026-11-26 10:00:00.250000".into(),
            params: [("n_steps".to_string(), 1.0)].into(),
            distributions: [("n_steps".to_string(), distribution_json(&d))].into(),
            user_attributes: [("sharpe".to_string(), "0.5".to_string()), ("seed".to_string(), "7".into())].into(),
            intermediate_values: [(64, 0.1), (192, 0.4)].into(),
            ..Default::default()
        };
        let r = trial_record(&t(3, state::COMPLETE, Some(0.9)));
        assert_eq!(r.params["n_steps"], 16.0);
        assert_eq!((r.number, r.state, r.seed), (3, TrialState::Complete, 7));
        assert_eq!(r.curve.iter().map(|c| (c.steps, c.value)).collect::<Vec<_>>(), [(64, 0.1), (192, 0.4), (192, 0.9)]);
        assert_eq!(r.metrics.get("sharpe"), Some(&0.5));
        assert_eq!(r.started_at.to_rfc3339(), "2026-11-26T10:00:00.250+00:00");
        let all = [
            t(0, state::COMPLETE, Some(0.5)),
            t(1, state::PRUNED, None),
            t(2, state::COMPLETE, Some(0.7)),
            t(3, state::COMPLETE, Some(0.7)),
        ];
        assert_eq!(best(&all).map(|b| b.number), Some(2));
    }
}
