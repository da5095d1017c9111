//! The ensemble: a candidate per algorithm, each judged by the same gate; the better of two planted
//! candidates is promoted, and neither of two noise ones is.

use super::*;
use crate::retrain::testkit::{FakeEvaluator, draft, registry_with_champion, spec, store_with_bars};
use chrono::TimeZone;
use std::time::Duration;

/// Holdout figures over 120 bars: the shared market noise (seed 7, as `FakeEvaluator::with`), a drift of
/// `edge` per bar, and `own` bars of noise of the model's own (seeded by `own`; 0 = none).
fn figures(sharpe: f64, edge: f64, own: u64) -> GateInput {
    let market = crate::retrain::noise::tests::normal(7, 120, 0.0, 0.01);
    let mine = if own == 0 { vec![0.0; 120] } else { crate::retrain::noise::tests::normal(own, 120, 0.0, 0.01) };
    let returns: Vec<f64> = market.iter().zip(&mine).map(|(m, o)| m + o + edge).collect();
    GateInput {
        sharpe,
        max_drawdown: 0.1,
        trades: 20,
        total_return: 0.05,
        buy_hold_return: 0.0,
        buy_hold_sharpe: 0.0,
        buy_hold_returns: vec![0.0; 120],
        returns,
    }
}

#[test]
fn choose_takes_the_better_of_two_planted_candidates_and_neither_of_two_noise_ones() {
    let cfg = crate::retrain::testkit::retrain_config(Duration::from_secs(1)).gate;
    let champion = figures(0.5, 0.0005, 0);
    // Planted: a steady lead over the champion in every bar, the second's larger.
    let (good, better) = (figures(1.5, 0.0015, 0), figures(3.0, 0.003, 0));
    let (decisions, best) = choose(&[&good, &better], Some(&champion), &cfg);
    assert!(decisions.iter().all(|d| d.promote), "both pass the gate: {decisions:?}");
    assert_eq!(best, Some(1), "the higher holdout Sharpe is promoted");
    let (_, best) = choose(&[&better, &good], Some(&champion), &cfg);
    assert_eq!(best, Some(0), "whatever the order");
    // Noise: the champion's drift plus noise of their own (seeds whose 120 bars happen to lead by 0.6 and 0.8
    // standard errors), with Sharpe figures that clear the margin; the gate's bootstrap sees no real lead.
    let (noise_a, noise_b) = (figures(0.9, 0.0005, 10), figures(1.2, 0.0005, 18));
    let (decisions, best) = choose(&[&noise_a, &noise_b], Some(&champion), &cfg);
    assert_eq!(best, None, "{decisions:?}");
    assert!(decisions.iter().all(|d| !d.promote && d.numbers["candidate_sharpe"] >= 0.9));
    // Planted beside noise: the planted one, never the noise.
    let (_, best) = choose(&[&noise_b, &good, &noise_a], Some(&champion), &cfg);
    assert_eq!(best, Some(1));
}

#[test]
fn with_two_candidates_each_needs_the_confidence_that_keeps_one_chance_of_luck() {
    let cfg = crate::retrain::testkit::retrain_config(Duration::from_secs(1)).gate;
    assert_eq!(cfg.confidence, 0.9);
    let champion = figures(0.5, 0.0005, 0);
    // A candidate with noise of its own and a lead that one candidate passes with, short of 95%.
    let lead = (1..200)
        .map(|i| figures(1.5, 0.0005 + f64::from(i) * 0.00002, 3))
        .find(|c| {
            let d = gate::decide(c, Some(&champion), &cfg);
            d.promote && d.numbers["confidence_vs_champion"] < 0.95
        })
        .expect("a lead between 90% and 95% likely");
    let (alone, best) = choose(&[&lead], Some(&champion), &cfg);
    assert_eq!((best, alone[0].numbers["confidence_required"]), (Some(0), 0.9), "{alone:?}");
    // Beside another candidate (one the gate refuses), the same lead is not enough: 95% is asked.
    let other = figures(0.4, 0.0005, 18);
    let (pair, best) = choose(&[&lead, &other], Some(&champion), &cfg);
    assert_eq!(best, None, "{pair:?}");
    assert!((pair[0].numbers["confidence_required"] - 0.95).abs() < 1e-12, "{pair:?}");
    assert!(pair[0].reason.contains("below the 95% required"), "{}", pair[0].reason);
    let (three, _) = choose(&[&lead, &other, &other], Some(&champion), &cfg);
    assert!((three[0].numbers["confidence_required"] - (1.0 - 0.1 / 3.0)).abs() < 1e-12);
}

/// A registry with a champion and two candidates of the policy, a PPO one and a SAC one: (champion, ppo,
/// sac).
fn two_candidates(state: &std::path::Path) -> (String, String, String) {
    let (champ, ppo) = registry_with_champion(state, ModelKind::Ppo);
    let reg = Registry::open(&state.join("models")).unwrap();
    let sac = reg.add(b"sac candidate bytes", Manifest { algorithm: Algorithm::Sac, ..draft(ModelKind::Ppo) }).unwrap();
    assert!(sac.id.starts_with("sac-"), "{}", sac.id);
    (champ, ppo, sac.id)
}

use crate::models::Manifest;

/// One retrain of the policy with `retrain.algorithms = ["ppo", "sac"]`, the fake child reporting `ppo` or
/// `sac` by the algorithm it is asked to train (`$2`).
async fn ensemble_run(
    dir: &std::path::Path,
    ppo: &str,
    sac: &str,
    ev: Arc<FakeEvaluator>,
) -> (RunRecord, Option<String>) {
    let done = |id: &str| format!(r#"echo '{{"event":"done","model_id":"{id}","metrics":{{"mean_return":1.0}}}}'"#);
    let script = format!(
        r#"case "$2" in ppo) [ "$5 $6" = "--json --steps" ] && [ "$7" = 1000 ] || exit 3; {};; sac) [ "$7" = 500 ] || exit 4; {};; *) exit 5;; esac"#,
        done(ppo),
        done(sac)
    );
    let mut s = spec(dir, &script, Duration::from_secs(10));
    s.retrain.algorithms = vec![Algorithm::Ppo, Algorithm::Sac];
    let p = RetrainPipeline::new(s, store_with_bars(dir), ev);
    let clock_time = Utc.with_ymd_and_hms(2010, 12, 11, 7, 0, 0).unwrap();
    let r = p.run(ModelKind::Ppo, Trigger { reason: "test".into(), clock_time }, &mut |_| {}).await;
    let champion = Registry::open(&dir.join("models")).unwrap().champion(ModelKind::Ppo).unwrap().map(|m| m.id);
    (r, champion)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ensemble_promotes_the_better_of_two_planted_candidates_and_records_each() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, ppo, sac) = two_candidates(dir.path());
    let figures = [
        (ppo.clone(), figures(1.5, 0.0015, 0)),
        (sac.clone(), figures(3.0, 0.003, 0)),
        (champ.clone(), figures(0.5, 0.0005, 0)),
    ];
    let ev = Arc::new(FakeEvaluator { figures: figures.into_iter().collect(), calls: Default::default() });
    let (r, champion) = ensemble_run(dir.path(), &ppo, &sac, ev.clone()).await;
    assert_eq!(r.outcome, RunOutcome::Promoted, "{r:?}");
    assert_eq!(champion.as_deref(), Some(sac.as_str()), "the SAC candidate, the higher Sharpe of the two");
    assert_eq!((r.candidate.as_deref(), r.new_champion()), (Some(sac.as_str()), Some(sac.as_str())));
    assert_eq!(
        *ev.calls.lock().unwrap(),
        vec![ppo.clone(), sac.clone(), champ.clone()],
        "each judged once, the champion once"
    );
    let rows: Vec<_> = r.candidates.iter().map(|c| (c.algorithm, c.model_id.clone().unwrap(), c.promoted)).collect();
    assert_eq!(rows, vec![(Algorithm::Ppo, ppo.clone(), false), (Algorithm::Sac, sac.clone(), true)]);
    assert!(r.candidates.iter().all(|c| c.decision.as_ref().is_some_and(|d| d.promote)), "both passed the gate");
    assert_eq!(r.candidates[0].metrics.as_ref().map(|m| m.sharpe), Some(1.5));
    assert!(r.reason().starts_with("sac candidate (2 of 2 passed)"), "{}", r.reason());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ensemble_promotes_neither_of_two_noise_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, ppo, sac) = two_candidates(dir.path());
    let figures = [
        (ppo.clone(), figures(0.9, 0.0005, 10)),
        (sac.clone(), figures(1.2, 0.0005, 18)),
        (champ.clone(), figures(0.5, 0.0005, 0)),
    ];
    let ev = Arc::new(FakeEvaluator { figures: figures.into_iter().collect(), calls: Default::default() });
    let (r, champion) = ensemble_run(dir.path(), &ppo, &sac, ev).await;
    assert_eq!(r.outcome, RunOutcome::Kept, "{r:?}");
    assert_eq!(champion.as_deref(), Some(champ.as_str()), "the champion stays");
    assert_eq!(r.candidates.len(), 2);
    assert!(
        r.candidates.iter().all(|c| !c.promoted && c.decision.as_ref().is_some_and(|d| !d.promote)),
        "{:?}",
        r.candidates
    );
    assert_eq!(r.candidate.as_deref(), Some(sac.as_str()), "the record shows the best judged");
    assert!(r.reason().starts_with("sac candidate (0 of 2 passed)"), "{}", r.reason());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_candidate_is_recorded_and_the_other_still_judged() {
    let dir = tempfile::tempdir().unwrap();
    let (champ, ppo, _) = two_candidates(dir.path());
    let figures = [(ppo.clone(), figures(1.5, 0.0015, 0)), (champ.clone(), figures(0.5, 0.0005, 0))];
    let ev = Arc::new(FakeEvaluator { figures: figures.into_iter().collect(), calls: Default::default() });
    // The SAC child reports a model the registry does not hold.
    let (r, champion) = ensemble_run(dir.path(), &ppo, "sac-0000000000000000", ev).await;
    assert_eq!(r.outcome, RunOutcome::Promoted, "{r:?}");
    assert_eq!(champion.as_deref(), Some(ppo.as_str()));
    let sac_row = &r.candidates[1];
    assert_eq!(sac_row.failure.as_ref().map(|f| f.code.as_str()), Some("registry"), "{sac_row:?}");
    assert!(sac_row.decision.is_none() && !sac_row.promoted);
}
