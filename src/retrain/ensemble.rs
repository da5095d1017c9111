//! The candidates of one retrain and the choice among them (FinRL's ensemble, with the noise-aware gate
//! in place of a plain Sharpe comparison): a training child per configured algorithm (`retrain.algorithms`;
//! one for the LSTM), each candidate checked and backtested on the holdout by the same evaluator, each
//! judged by the gate against the champion (at a confidence raised for the number of candidates), and the
//! best that passes (by holdout Sharpe) promoted. With
//! one algorithm a failure of its child or its evaluation fails the run, as it always did; with several,
//! a failed candidate is recorded and the others are still judged, and the run fails only when none is.

use super::*;
use crate::retrain::record::CandidateRecord;
use crate::retrain::record::{TrainedOn, WarmStart};

/// A candidate its child trained and registered.
pub(super) struct Trained {
    model_id: String,
    train_metrics: BTreeMap<String, f64>,
    curves: BTreeMap<String, Vec<f64>>,
    trained_on: Option<TrainedOn>,
    warm_start: Option<WarmStart>,
}

/// A training child's end: its candidate, or why not (with what it reported before failing).
pub(super) type CandidateResult = Result<Trained, (Failure, Option<Box<Trained>>)>;

/// Each candidate's decision against the champion, and the index of the one to promote: the highest
/// holdout Sharpe among those the gate passes (none when none passes). With k candidates a retrain has k
/// chances to pass the bootstrap by luck, so each must reach `1 - (1 - confidence) / k` (Bonferroni): the
/// chance that noise is promoted stays at most `1 - confidence`, as with one candidate.
pub(super) fn choose(
    candidates: &[&GateInput],
    champion: Option<&GateInput>,
    cfg: &crate::config::GateConfig,
) -> (Vec<gate::GateDecision>, Option<usize>) {
    let k = candidates.len().max(1) as f64;
    let cfg = crate::config::GateConfig { confidence: 1.0 - (1.0 - cfg.confidence) / k, ..cfg.clone() };
    let decisions: Vec<_> = candidates.iter().map(|c| gate::decide(c, champion, &cfg)).collect();
    let best = (0..candidates.len())
        .filter(|&i| decisions[i].promote)
        .max_by(|&a, &b| candidates[a].sharpe.total_cmp(&candidates[b].sharpe));
    (decisions, best)
}

impl RetrainPipeline {
    /// Runs the training child of `algorithm` on the snapshot; its candidate's id once it is registered
    /// with the kind and algorithm asked for.
    pub(super) async fn train_one(
        &self,
        r: &RunRecord,
        algorithm: Algorithm,
        snapshot: &std::path::Path,
        seed: u64,
        registry: &Registry,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> CandidateResult {
        let kind = r.kind;
        let champion = r.champion_before.as_deref();
        // A policy candidate starts from a champion of its own algorithm only (a SAC policy's state is no
        // PPO's); a champion whose manifest cannot be read goes to the child, which says why it cannot.
        let other =
            champion.filter(|id| kind == ModelKind::Ppo && registry.get(id).is_ok_and(|m| m.algorithm != algorithm));
        let own = champion.filter(|_| other.is_none());
        let spec = self.spec.child_spec(kind, algorithm, snapshot, (r.clock_time, seed), own);
        let mut curves = BTreeMap::new();
        let mut trained_on = None;
        // With warm start and no such champion the candidate trains from scratch; else the child says how it began.
        let mut warm_start = (self.spec.warm_starts(kind, algorithm) && own.is_none()).then(|| {
            let reason = match other {
                Some(id) => format!("the champion {id} is not a {algorithm} policy"),
                None => format!("no {} champion to start from", kind.as_str()),
            };
            WarmStart::scratch(None, reason)
        });
        let outcome = child::run(&spec, |line| {
            if line.get("event").and_then(|e| e.as_str()) == Some("done") {
                trained_on = TrainedOn::of_line(line);
                warm_start = WarmStart::of_line(line).or(warm_start.take());
            }
            // A search (`retrain.tune`) reports its study whole: stored, not passed on as progress.
            if line.get("event").and_then(|e| e.as_str()) == Some("study") {
                self.store_study(&r.id, line);
                return;
            }
            record::add_to_curves(&mut curves, line);
            progress(RetrainProgress::Training { kind, line: line.clone() })
        })
        .await;
        log_start(&r.id, algorithm, warm_start.as_ref(), trained_on.as_ref());
        let mut t = Trained { model_id: String::new(), train_metrics: BTreeMap::new(), curves, trained_on, warm_start };
        match outcome {
            ChildOutcome::Done { model_id, metrics } => (t.model_id, t.train_metrics) = (model_id, metrics),
            // Too little data: the run is skipped (`NOT_ENOUGH_DATA_CODE`), not failed, when no candidate is left.
            ChildOutcome::Failed(child::ChildFailure::Reported(m)) if m.starts_with(record::NOT_ENOUGH_DATA) => {
                let failure = Failure { stage: "train".into(), code: record::NOT_ENOUGH_DATA_CODE.into(), message: m };
                return Err((failure, Some(Box::new(t))));
            }
            ChildOutcome::Failed(f) => {
                let failure = Failure { stage: "train".into(), code: f.code().into(), message: f.to_string() };
                return Err((failure, Some(Box::new(t))));
            }
        }
        let manifest = match registry.load(&t.model_id) {
            Ok((m, _)) => m,
            Err(e) => return Err((fail("registry", "registry")(e), Some(Box::new(t)))),
        };
        let want = if kind == ModelKind::Ppo { algorithm } else { manifest.algorithm };
        if manifest.kind != kind || manifest.algorithm != want {
            let message = format!(
                "the {algorithm} child reported {}, a {} model of {}, for a {} retrain",
                t.model_id,
                manifest.kind.as_str(),
                manifest.algorithm,
                kind.as_str()
            );
            return Err((Failure { stage: "registry".into(), code: "wrong_kind".into(), message }, Some(Box::new(t))));
        }
        Ok(t)
    }

    /// A search's study, as its child reported it, into the store (a WARN when it cannot be).
    fn store_study(&self, run: &str, line: &serde_json::Value) {
        match serde_json::from_value::<study_record::StudyRecord>(line["study"].clone()) {
            Ok(s) => {
                if let Err(e) = study_record::save(&self.store, &s) {
                    log::warn!("retrain {run}: cannot store the search's study {}: {e}", s.name);
                }
            }
            Err(e) => log::warn!("retrain {run}: the search reported a study that does not parse: {e}"),
        }
    }

    /// Evaluates the trained candidates and the champion on the holdout, applies the gate to each,
    /// promotes the best that passes, and fills the record.
    pub(super) async fn judge(
        &self,
        r: &mut RunRecord,
        trained: Vec<(Algorithm, CandidateResult)>,
        registry: &Registry,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> Result<(), Failure> {
        let single = trained.len() == 1;
        let mut rows: Vec<CandidateRecord> = Vec::new();
        let mut ok: Vec<(usize, Trained)> = Vec::new();
        let mut first_failure = None;
        for (algorithm, t) in trained {
            let mut row = CandidateRecord {
                algorithm,
                model_id: None,
                train_metrics: BTreeMap::new(),
                metrics: None,
                decision: None,
                failure: None,
                promoted: false,
                warm_start: None,
            };
            match t {
                Ok(t) => {
                    (row.model_id, row.train_metrics) = (Some(t.model_id.clone()), t.train_metrics.clone());
                    row.warm_start = t.warm_start.clone();
                    ok.push((rows.len(), t));
                }
                Err((f, t)) => {
                    row.model_id = t.as_ref().map(|t| t.model_id.clone()).filter(|id| !id.is_empty());
                    row.warm_start = t.as_ref().and_then(|t| t.warm_start.clone());
                    if single {
                        // One candidate: its child's failure is the run's, as before the ensemble.
                        if let Some(t) = t {
                            let t = *t;
                            (r.curves, r.trained_on, r.train_metrics) = (t.curves, t.trained_on, t.train_metrics);
                            r.candidate = (!t.model_id.is_empty()).then_some(t.model_id);
                        }
                    }
                    log::warn!("retrain {}: the {algorithm} candidate failed: {} ({})", r.id, f.message, f.code);
                    row.failure = Some(f.clone());
                    first_failure.get_or_insert(f);
                }
            }
            rows.push(row);
        }
        r.candidates = rows;
        if ok.is_empty() {
            return Err(first_failure.unwrap_or_else(|| Failure {
                stage: "train".into(),
                code: "no_model".into(),
                message: "no algorithm configured (retrain.algorithms)".into(),
            }));
        }
        if single && let Some((_, t)) = ok.first() {
            r.candidate = Some(t.model_id.clone());
            (r.train_metrics, r.curves, r.trained_on) =
                (t.train_metrics.clone(), t.curves.clone(), t.trained_on.clone());
        }
        let figures = self.evaluate_all(r, &ok, single, progress).await?;
        self.decide_and_promote(r, ok, figures, registry)
    }

    /// The holdout figures of each candidate (checked first) and of the champion, off the reactor. With
    /// one candidate its evaluation failure fails the run; with several it is recorded on the candidate.
    async fn evaluate_all(
        &self,
        r: &mut RunRecord,
        ok: &[(usize, Trained)],
        single: bool,
        progress: &mut (dyn FnMut(RetrainProgress) + Send),
    ) -> Result<(Vec<Option<GateInput>>, Option<GateInput>), Failure> {
        for (_, t) in ok {
            progress(RetrainProgress::Evaluating { kind: r.kind, candidate: t.model_id.clone() });
        }
        let ids: Vec<String> = ok.iter().map(|(_, t)| t.model_id.clone()).collect();
        let (ev, champion, as_of) = (self.evaluator.clone(), r.champion_before.clone(), r.clock_time);
        let (cands, champ) = tokio::task::spawn_blocking(move || {
            let cands: Vec<Result<GateInput, EvalError>> =
                ids.iter().map(|id| ev.check(id).and_then(|()| ev.evaluate_at(id, as_of))).collect();
            let champ = champion.map(|c| ev.evaluate_at(&c, as_of)).transpose();
            (cands, champ)
        })
        .await
        .map_err(|e| Failure { stage: "evaluate".into(), code: "panic".into(), message: e.to_string() })?;
        let mut figures = Vec::new();
        for ((row, _), c) in ok.iter().zip(cands) {
            match c {
                Ok(g) => figures.push(Some(g)),
                Err(e) if single => return Err(fail("evaluate", "evaluate")(e)),
                Err(e) => {
                    r.candidates[*row].failure = Some(fail("evaluate", "evaluate")(e));
                    figures.push(None);
                }
            }
        }
        let champ = champ.map_err(fail("evaluate", "evaluate"))?;
        if figures.iter().all(Option::is_none) {
            let f = r.candidates.iter().find_map(|c| c.failure.clone());
            return Err(f.unwrap_or_else(|| fail("evaluate", "evaluate")("no candidate could be evaluated")));
        }
        Ok((figures, champ))
    }

    /// The gate on every evaluated candidate; the best that passes is promoted. The record's candidate,
    /// figures and decision are the promoted one's, else the best one's by holdout Sharpe.
    fn decide_and_promote(
        &self,
        r: &mut RunRecord,
        ok: Vec<(usize, Trained)>,
        (figures, champ): (Vec<Option<GateInput>>, Option<GateInput>),
        registry: &Registry,
    ) -> Result<(), Failure> {
        let judged: Vec<usize> = (0..ok.len()).filter(|&i| figures[i].is_some()).collect();
        let inputs: Vec<&GateInput> = judged.iter().filter_map(|&i| figures[i].as_ref()).collect();
        let (decisions, best) = choose(&inputs, champ.as_ref(), &self.spec.retrain.gate);
        for ((&i, d), g) in judged.iter().zip(&decisions).zip(&inputs) {
            let row = &mut r.candidates[ok[i].0];
            row.decision = Some(d.clone());
            row.metrics = Some((*g).clone().summary());
        }
        // The one the record shows: the promoted, else the highest Sharpe judged.
        let shown = best.unwrap_or_else(|| {
            (0..inputs.len()).max_by(|&a, &b| inputs[a].sharpe.total_cmp(&inputs[b].sharpe)).unwrap_or(0)
        });
        let i = judged[shown];
        let (row, t) = (ok[i].0, &ok[i].1);
        r.candidate = Some(t.model_id.clone());
        (r.train_metrics, r.curves, r.trained_on) = (t.train_metrics.clone(), t.curves.clone(), t.trained_on.clone());
        r.candidate_metrics = Some(inputs[shown].clone().summary());
        r.champion_metrics = champ.map(GateInput::summary);
        let mut decision = decisions[shown].clone();
        if r.candidates.len() > 1 {
            let algorithm = r.candidates[row].algorithm;
            let passed = decisions.iter().filter(|d| d.promote).count();
            decision.reason =
                format!("{algorithm} candidate ({passed} of {} passed): {}", r.candidates.len(), decision.reason);
        }
        r.outcome = if best.is_some() { RunOutcome::Promoted } else { RunOutcome::Kept };
        let reason = decision.reason.clone();
        r.decision = Some(decision);
        if best.is_some() {
            r.candidates[row].promoted = true;
            let m = registry
                .promote(&t.model_id, &format!("retrain {}: {reason}", r.id))
                .map_err(fail("promote", "promote"))?;
            r.champion_after = Some(m.id);
        }
        Ok(())
    }
}

// This file is `pipeline::ensemble` (a `#[path]` module of pipeline.rs), so its `tests` file is named here.
#[cfg(test)]
#[path = "ensemble/tests.rs"]
mod tests;

/// How a candidate began (a warm start is INFO, a fall-back to scratch a WARN) and where its child trained.
fn log_start(run: &str, algorithm: Algorithm, warm_start: Option<&WarmStart>, trained_on: Option<&TrainedOn>) {
    if let Some(w) = warm_start {
        if w.warm {
            log::info!("retrain {run}: the {algorithm} candidate {}", w.describe());
        } else {
            log::warn!("retrain {run}: the {algorithm} candidate {}", w.describe());
        }
    }
    if let Some(on) = trained_on {
        log::info!(
            "retrain {run}: the {algorithm} child trained on {} ({} env; asked for {})",
            on.device,
            on.env,
            on.requested
        );
    }
}
