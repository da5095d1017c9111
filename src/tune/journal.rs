//! A study as an Optuna journal file (`--optuna-journal FILE`), so that `optuna-dashboard FILE` and
//! `optuna.load_study(storage=JournalStorage(JournalFileBackend(FILE)))` show the same search: the
//! journal's operation log, one JSON object a line (Optuna's `JournalOperation` codes): the study created
//! (maximising the metric), then each trial created whole, in number order, with its distributions,
//! parameters (in Optuna's internal form: a choice's index), state, value, the metric at each rung as
//! intermediate values (by step) and the final metrics as user attributes.

use crate::config::Dist;
use crate::retrain::study_record::{StudyRecord, TrialState};
use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::io::Write;

const CREATE_STUDY: u8 = 0;
const CREATE_TRIAL: u8 = 4;
/// Optuna's `StudyDirection.MAXIMIZE`.
const MAXIMIZE: u8 = 2;
const WORKER: &str = "tradebot-export";

/// Optuna's `TrialState` value for ours: a trial stopped by the time budget is shown as pruned.
fn state(s: TrialState) -> u8 {
    match s {
        TrialState::Running => 0,
        TrialState::Complete => 1,
        TrialState::Pruned | TrialState::Stopped => 2,
        TrialState::Failed => 3,
    }
}

/// Optuna's JSON for a distribution (`distribution_to_json`: a string holding name and attributes).
pub(super) fn distribution(d: &Dist) -> String {
    let v = match d {
        Dist::Log { low, high } => {
            json!({"name": "FloatDistribution", "attributes": {"low": low, "high": high, "log": true, "step": null}})
        }
        Dist::Linear { low, high } => {
            json!({"name": "FloatDistribution", "attributes": {"low": low, "high": high, "log": false, "step": null}})
        }
        Dist::Int { low, high } => {
            json!({"name": "IntDistribution", "attributes": {"low": low, "high": high, "log": false, "step": 1}})
        }
        Dist::Choice { values } => json!({"name": "CategoricalDistribution", "attributes": {"choices": values}}),
    };
    v.to_string()
}

fn time(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| Value::String(t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()))
}

/// The journal's lines for `study`.
pub(crate) fn lines(study: &StudyRecord) -> Vec<Value> {
    let mut out = vec![json!({
        "op_code": CREATE_STUDY, "worker_id": WORKER, "study_name": study.name, "directions": [MAXIMIZE],
    })];
    for t in &study.trials {
        let mut distributions = serde_json::Map::new();
        let mut params = serde_json::Map::new();
        for (name, x) in &t.params {
            let Some(d) = study.space.get(name) else { continue };
            distributions.insert(name.clone(), Value::String(distribution(d)));
            params.insert(name.clone(), json!(super::space::to_internal_choice(d, *x)));
        }
        let value = match t.state {
            TrialState::Complete => t.value().filter(|v| v.is_finite()).map_or(Value::Null, |v| json!(v)),
            _ => Value::Null,
        };
        let intermediate: serde_json::Map<String, Value> =
            t.curve.iter().filter(|r| r.value.is_finite()).map(|r| (r.steps.to_string(), json!(r.value))).collect();
        let mut attrs = serde_json::Map::new();
        attrs.insert("seed".into(), json!(t.seed));
        for (k, v) in t.metrics.iter().filter(|(_, v)| v.is_finite()) {
            attrs.insert(k.clone(), json!(v));
        }
        if let Some(e) = &t.error {
            attrs.insert("error".into(), json!(e));
        }
        out.push(json!({
            "op_code": CREATE_TRIAL, "worker_id": WORKER, "study_id": 0,
            "state": state(t.state), "value": value, "values": Value::Null,
            "datetime_start": time(Some(t.started_at)), "datetime_complete": time(t.ended_at),
            "distributions": distributions, "params": params,
            "user_attrs": attrs, "system_attrs": {}, "intermediate_values": intermediate,
        }));
    }
    out
}

/// Writes the journal to `path` (replacing it).
pub(crate) fn write(study: &StudyRecord, path: &std::path::Path) -> anyhow::Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating the Optuna journal {}", path.display()))?,
    );
    for line in lines(study) {
        writeln!(f, "{line}")?;
    }
    f.flush().with_context(|| format!("writing the Optuna journal {}", path.display()))?;
    Ok(())
}
