//! The promotion gate: a candidate replaces the champion only if, on a holdout it never trained on and in
//! the same backtest, its lead over the champion is unlikely to be noise (a paired block bootstrap of the
//! per-bar return differences, `retrain::noise`, at `confidence`), it beats the champion's Sharpe ratio by
//! the configured margin, keeps its maximum drawdown within the cap, trades at least the minimum number of
//! times, and does not trail buy-and-hold by more than `max_buy_hold_shortfall` (or than the champion
//! does, when the champion trails it by more). With no champion, it must
//! beat both baselines (cash and buy-and-hold) by the same bootstrap test. The decision and its numbers
//! (per-fold returns of the holdout's K folds, the confidences) are kept, whichever way it goes.

use super::noise::{fold_returns, lead_confidence};
use crate::config::GateConfig;
use crate::env::Objective;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The backtest figures the gate reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateInput {
    /// Annualised Sharpe ratio of the per-bar returns over the holdout (0 when they do not vary).
    pub sharpe: f64,
    /// As a positive fraction (0.2 = 20% below the peak).
    pub max_drawdown: f64,
    /// Fills the strategy made over the holdout; the gate asks for at least `min_trades`.
    pub trades: u64,
    /// Total return over the holdout as a fraction of the starting equity (0.05 = +5%).
    pub total_return: f64,
    /// Buy-and-hold's total return over the same bars.
    #[serde(default)]
    pub buy_hold_return: f64,
    /// Buy-and-hold's Sharpe ratio over the same bars.
    #[serde(default)]
    pub buy_hold_sharpe: f64,
    /// Per-bar returns of the strategy over the holdout (not stored; the decision keeps the figures).
    #[serde(skip)]
    pub returns: Vec<f64>,
    /// Per-bar returns of equal-weight buy-and-hold over the same bars.
    #[serde(skip)]
    pub buy_hold_returns: Vec<f64>,
}

impl GateInput {
    /// The figures without the per-bar series (what a run record stores).
    pub fn summary(self) -> GateInput {
        GateInput { returns: Vec::new(), buy_hold_returns: Vec::new(), ..self }
    }
}

/// The gate's verdict on one candidate: promote or keep the champion, why, and the numbers it judged by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    /// True: the candidate replaces the champion.
    pub promote: bool,
    /// One sentence for logs and records: the test it passed last, or the first it failed and by how much.
    pub reason: String,
    /// The figures behind the decision by name (Sharpe ratios, drawdowns, lead confidences, per-fold returns).
    pub numbers: BTreeMap<String, f64>,
}

/// `champion = None` (no model yet): the candidate must beat cash and buy-and-hold by the bootstrap test.
pub fn decide(candidate: &GateInput, champion: Option<&GateInput>, cfg: &GateConfig) -> GateDecision {
    let mut numbers = numbers_of(candidate, champion, cfg);
    let passed = bounds(candidate, champion, cfg)
        .and_then(|()| leads(candidate, champion, cfg, &mut numbers))
        .and_then(|()| verdict(candidate, champion, cfg, &numbers));
    match passed {
        Ok(reason) => GateDecision { promote: true, reason, numbers },
        Err(Refused(reason)) => GateDecision { promote: false, reason, numbers },
    }
}

/// Why the gate keeps the champion: the first check the candidate failed.
struct Refused(String);

/// The figures every decision keeps: the candidate's, buy-and-hold's, the champion's, the settings, and
/// the per-fold returns.
fn numbers_of(candidate: &GateInput, champion: Option<&GateInput>, cfg: &GateConfig) -> BTreeMap<String, f64> {
    let mut numbers = BTreeMap::from([
        ("candidate_sharpe".to_string(), candidate.sharpe),
        ("candidate_max_drawdown".to_string(), candidate.max_drawdown),
        ("candidate_trades".to_string(), candidate.trades as f64),
        ("candidate_return".to_string(), candidate.total_return),
        ("buy_hold_return".to_string(), candidate.buy_hold_return),
        ("buy_hold_sharpe".to_string(), candidate.buy_hold_sharpe),
        ("min_sharpe_margin".to_string(), cfg.min_sharpe_margin),
        ("max_drawdown_cap".to_string(), cfg.max_drawdown),
        ("confidence_required".to_string(), cfg.confidence),
    ]);
    for (i, r) in fold_returns(&candidate.returns, cfg.folds).iter().enumerate() {
        numbers.insert(format!("fold{}_candidate_return", i + 1), *r);
    }
    // The baselines on the same folds (cash's are 0).
    for (i, r) in fold_returns(&candidate.buy_hold_returns, cfg.folds).iter().enumerate() {
        numbers.insert(format!("fold{}_buy_hold_return", i + 1), *r);
    }
    if let Some(c) = champion {
        numbers.insert("champion_sharpe".into(), c.sharpe);
        numbers.insert("champion_max_drawdown".into(), c.max_drawdown);
        numbers.insert("champion_trades".into(), c.trades as f64);
        numbers.insert("champion_return".into(), c.total_return);
        for (i, r) in fold_returns(&c.returns, cfg.folds).iter().enumerate() {
            numbers.insert(format!("fold{}_champion_return", i + 1), *r);
        }
    }
    numbers
}

/// The candidate's own bounds: finite figures, the drawdown cap, the trade minimum, the shortfall to
/// buy-and-hold and, without a champion and for a Sharpe-trained model, buy-and-hold's Sharpe.
fn bounds(candidate: &GateInput, champion: Option<&GateInput>, cfg: &GateConfig) -> Result<(), Refused> {
    if !(candidate.sharpe.is_finite() && candidate.max_drawdown.is_finite()) {
        let why = format!(
            "candidate backtest is not finite (Sharpe {}, drawdown {})",
            candidate.sharpe, candidate.max_drawdown
        );
        return Err(Refused(why));
    }
    if candidate.max_drawdown > cfg.max_drawdown {
        let why = format!(
            "candidate max drawdown {:.1}% exceeds the cap of {:.1}%",
            candidate.max_drawdown * 100.0,
            cfg.max_drawdown * 100.0
        );
        return Err(Refused(why));
    }
    if candidate.trades < cfg.min_trades {
        let why = format!("candidate traded {} times, fewer than the minimum {}", candidate.trades, cfg.min_trades);
        return Err(Refused(why));
    }
    let allowed = allowed_shortfall(candidate, champion, cfg);
    if candidate.buy_hold_return.is_finite() && candidate.total_return < candidate.buy_hold_return - allowed {
        let why = format!(
            "candidate return {:.1}% trails buy-and-hold's {:.1}% by more than {:.1} points{}",
            candidate.total_return * 100.0,
            candidate.buy_hold_return * 100.0,
            allowed * 100.0,
            if allowed > cfg.max_buy_hold_shortfall { " (the champion's own shortfall)" } else { "" }
        );
        return Err(Refused(why));
    }
    // Without a champion, "better" is the training reward's (`env.reward`): a Sharpe-trained candidate
    // must beat buy-and-hold's Sharpe, a return-trained one buy-and-hold's per-bar returns (below).
    if champion.is_none()
        && cfg.objective == Objective::Sharpe
        && (candidate.buy_hold_sharpe.is_nan() || candidate.sharpe < candidate.buy_hold_sharpe + cfg.min_sharpe_margin)
    {
        let why = format!(
            "candidate Sharpe {:.3} does not beat buy-and-hold's {:.3} by the margin {:.3} (env.reward = differential-sharpe)",
            candidate.sharpe, candidate.buy_hold_sharpe, cfg.min_sharpe_margin
        );
        return Err(Refused(why));
    }
    Ok(())
}

/// How far the candidate may trail buy-and-hold: `max_buy_hold_shortfall`, or the champion's own shortfall
/// on the same holdout when that is larger. The bound keeps out a model that does worse than holding; a
/// champion already trailing by more is not a reason to refuse a candidate that trails by less (it still
/// has to beat the champion by the Sharpe margin, with the required confidence).
fn allowed_shortfall(candidate: &GateInput, champion: Option<&GateInput>, cfg: &GateConfig) -> f64 {
    let champion_shortfall = champion
        .map(|c| candidate.buy_hold_return - c.total_return)
        .filter(|s| s.is_finite())
        .unwrap_or(f64::NEG_INFINITY);
    cfg.max_buy_hold_shortfall.max(champion_shortfall)
}

/// The bootstrap confidence of the candidate's lead over each reference it must beat (the champion; or
/// cash, and buy-and-hold for a return-trained model), each kept in `numbers`.
fn leads(
    candidate: &GateInput,
    champion: Option<&GateInput>,
    cfg: &GateConfig,
    numbers: &mut BTreeMap<String, f64>,
) -> Result<(), Refused> {
    let cash = vec![0.0; candidate.returns.len()];
    let refs: Vec<(&str, &[f64])> = match (champion, cfg.objective) {
        (Some(c), _) => vec![("champion", &c.returns)],
        (None, Objective::Return) => vec![("cash", &cash), ("buy_hold", &candidate.buy_hold_returns)],
        (None, Objective::Sharpe) => vec![("cash", &cash)],
    };
    for (name, r) in refs {
        let Some(conf) = lead_confidence(&candidate.returns, r) else {
            let why = format!(
                "no comparable per-bar returns of the candidate and {name} ({} and {} bars): the lead cannot be told from noise",
                candidate.returns.len(),
                r.len()
            );
            return Err(Refused(why));
        };
        numbers.insert(format!("confidence_vs_{name}"), conf);
        if conf < cfg.confidence {
            let why = format!(
                "the candidate's lead over {name} is {:.0}% likely real (bootstrap of per-bar returns), below the {:.0}% required",
                conf * 100.0,
                cfg.confidence * 100.0
            );
            return Err(Refused(why));
        }
    }
    Ok(())
}

/// The promotion's reason; with a champion, the candidate must also beat its Sharpe by the margin.
fn verdict(
    candidate: &GateInput,
    champion: Option<&GateInput>,
    cfg: &GateConfig,
    numbers: &BTreeMap<String, f64>,
) -> Result<String, Refused> {
    Ok(match champion {
        None if cfg.objective == Objective::Sharpe => format!(
            "no champion yet; candidate Sharpe {:.3} beats buy-and-hold's {:.3} by at least {:.3} and cash with {:.0}% confidence, within the drawdown cap and the trade minimum",
            candidate.sharpe,
            candidate.buy_hold_sharpe,
            cfg.min_sharpe_margin,
            cfg.confidence * 100.0
        ),
        None => format!(
            "no champion yet; candidate beats cash and buy-and-hold with {:.0}% confidence, within the drawdown cap and the trade minimum",
            cfg.confidence * 100.0
        ),
        Some(c) => {
            // A champion whose Sharpe is undefined (it never traded) is beaten by any finite figure.
            let champ = if c.sharpe.is_nan() { f64::NEG_INFINITY } else { c.sharpe };
            if candidate.sharpe < champ + cfg.min_sharpe_margin {
                let why = format!(
                    "candidate Sharpe {:.3} does not beat the champion's {:.3} by the margin {:.3}",
                    candidate.sharpe, c.sharpe, cfg.min_sharpe_margin
                );
                return Err(Refused(why));
            }
            format!(
                "candidate Sharpe {:.3} beats the champion's {:.3} by at least {:.3}, a lead {:.0}% likely real",
                candidate.sharpe,
                c.sharpe,
                cfg.min_sharpe_margin,
                numbers.get("confidence_vs_champion").copied().unwrap_or(f64::NAN) * 100.0
            )
        }
    })
}

/// A decision's numbers in one line for people: the holdout returns and Sharpe ratios of the candidate,
/// the champion and buy-and-hold, the lead confidences against what was required, and the candidate's
/// fold returns. Only the numbers the decision reached are shown.
pub fn numbers_line(n: &BTreeMap<String, f64>) -> String {
    let pct = |k: &str| n.get(k).map(|v| format!("{:+.1}%", v * 100.0));
    let mut parts = Vec::new();
    for (who, ret, sharpe) in [
        ("candidate", "candidate_return", Some("candidate_sharpe")),
        ("champion", "champion_return", Some("champion_sharpe")),
        ("buy-and-hold", "buy_hold_return", None),
    ] {
        if let Some(r) = pct(ret) {
            let sh = sharpe.and_then(|k| n.get(k)).map(|s| format!(" (Sharpe {s:.2})")).unwrap_or_default();
            parts.push(format!("{who} {r}{sh}"));
        }
    }
    let need = n.get("confidence_required").copied().unwrap_or(f64::NAN);
    for (key, name) in [
        ("confidence_vs_champion", "champion"),
        ("confidence_vs_cash", "cash"),
        ("confidence_vs_buy_hold", "buy-and-hold"),
    ] {
        if let Some(c) = n.get(key) {
            parts.push(format!("lead over {name} {:.0}% likely (needs {:.0}%)", c * 100.0, need * 100.0));
        }
    }
    for (who, key) in [("candidate", "candidate"), ("buy-and-hold", "buy_hold")] {
        let folds: Vec<String> = (1..).map_while(|i| pct(&format!("fold{i}_{key}_return"))).collect();
        if !folds.is_empty() {
            parts.push(format!("{who}'s folds {}", folds.join(" ")));
        }
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numbers_line_shows_what_the_decision_reached() {
        let n = BTreeMap::from([
            ("candidate_return".to_string(), 0.159),
            ("candidate_sharpe".to_string(), 0.81),
            ("champion_return".to_string(), 0.05),
            ("champion_sharpe".to_string(), 0.4),
            ("buy_hold_return".to_string(), 0.344),
            ("confidence_required".to_string(), 0.9),
            ("confidence_vs_champion".to_string(), 0.62),
            ("fold1_candidate_return".to_string(), 0.01),
            ("fold2_candidate_return".to_string(), -0.02),
            ("fold1_buy_hold_return".to_string(), 0.03),
        ]);
        assert_eq!(
            numbers_line(&n),
            "candidate +15.9% (Sharpe 0.81); champion +5.0% (Sharpe 0.40); buy-and-hold +34.4%; lead over champion 62% likely (needs 90%); candidate's folds +1.0% -2.0%; buy-and-hold's folds +3.0%"
        );
        assert_eq!(numbers_line(&BTreeMap::new()), "");
    }
    use crate::retrain::noise::tests::normal;

    /// The test kit's gate: Sharpe margin 0.1, drawdown cap 0.25, 5 trades, confidence 0.9, 4 folds,
    /// shortfall 0.05.
    fn cfg() -> GateConfig {
        crate::retrain::testkit::retrain_config(std::time::Duration::from_secs(60)).gate
    }

    /// A backtest's figures from its per-bar returns (buy-and-hold: the returns at half the drift).
    fn g(returns: Vec<f64>, trades: u64) -> GateInput {
        let n = returns.len() as f64;
        let mean = returns.iter().sum::<f64>() / n;
        let sd = (returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let total = returns.iter().fold(1.0, |a, r| a * (1.0 + r)) - 1.0;
        GateInput {
            sharpe: mean / sd * 252f64.sqrt(),
            max_drawdown: 0.1,
            trades,
            total_return: total,
            buy_hold_return: total.min(0.0),
            buy_hold_sharpe: 0.0,
            buy_hold_returns: vec![0.0; returns.len()],
            returns,
        }
    }

    fn plus(a: &[f64], b: &[f64]) -> Vec<f64> {
        a.iter().zip(b).map(|(x, y)| x + y).collect()
    }

    #[test]
    fn promotes_a_real_edge_and_keeps_the_numbers() {
        let champ = g(normal(1, 250, 0.0005, 0.01), 20);
        let cand = g(plus(&champ.returns, &normal(2, 250, 0.002, 0.002)), 20);
        let d = decide(&cand, Some(&champ), &cfg());
        assert!(d.promote, "{}", d.reason);
        assert!(d.numbers["confidence_vs_champion"] > 0.99);
        assert!(d.numbers.contains_key("fold4_candidate_return") && d.numbers.contains_key("fold1_champion_return"));
        assert_eq!(d.numbers["champion_sharpe"], champ.sharpe);
    }

    #[test]
    fn a_champion_trailing_buy_and_hold_by_more_widens_the_shortfall_bound_to_its_own() {
        let mut champ = g(normal(1, 250, 0.0005, 0.01), 20);
        let mut cand = g(plus(&champ.returns, &normal(2, 250, 0.002, 0.002)), 20);
        // Buy-and-hold made 10 points more than the candidate on the same holdout, more still than the champion.
        let bh = cand.total_return + 0.10;
        cand.buy_hold_return = bh;
        champ.buy_hold_return = bh;
        assert!(bh - champ.total_return > 0.10);
        let d = decide(&cand, Some(&champ), &cfg());
        assert!(d.promote, "{}", d.reason);
        // Against a champion within the bound, the 5 points hold.
        let near = GateInput { total_return: bh - 0.01, ..champ.clone() };
        let d = decide(&cand, Some(&near), &cfg());
        assert!(
            !d.promote && d.reason.contains("trails buy-and-hold's") && d.reason.contains("by more than 5.0 points"),
            "{}",
            d.reason
        );
        // A candidate that trails by more than the champion does is refused for it, naming the champion's bound.
        let d = decide(&champ, Some(&cand), &cfg());
        assert!(!d.promote);
        let d = decide(&GateInput { total_return: champ.total_return - 0.05, ..champ.clone() }, Some(&champ), &cfg());
        assert!(d.reason.contains("(the champion's own shortfall)"), "{}", d.reason);
    }

    #[test]
    fn noise_is_never_promoted_a_planted_edge_nearly_always() {
        let (mut noise, mut random, mut edge) = (0, 0, 0);
        for seed in 0..200u64 {
            let base = normal(1000 + seed, 250, 0.0005, 0.01);
            let champ = g(base.clone(), 20);
            // The champion's own returns, slightly perturbed (its weights, nudged).
            let nudged = g(plus(&base, &normal(5000 + seed, 250, 0.0, 0.0001)), 20);
            noise += usize::from(decide(&nudged, Some(&champ), &cfg()).promote);
            // A policy as good as the champion in expectation, independent of it.
            let other = g(normal(9000 + seed, 250, 0.0005, 0.01), 20);
            random += usize::from(decide(&other, Some(&champ), &cfg()).promote);
            let better = g(plus(&base, &normal(7000 + seed, 250, 0.0015, 0.003)), 20);
            edge += usize::from(decide(&better, Some(&champ), &cfg()).promote);
        }
        assert_eq!(noise, 0, "a nudged champion was promoted");
        assert!(random <= 30, "{random} of 200 equally good random candidates promoted (about 10% expected)");
        assert!(edge >= 190, "a planted edge was promoted only {edge} times of 200");
    }

    #[test]
    fn without_a_champion_the_candidate_must_beat_cash_and_buy_and_hold() {
        let good = g(normal(3, 250, 0.003, 0.01), 20);
        let d = decide(&good, None, &cfg());
        assert!(d.promote, "{}", d.reason);
        assert!(d.numbers["confidence_vs_cash"] >= 0.9 && d.numbers["confidence_vs_buy_hold"] >= 0.9);
        let flat = g(normal(4, 250, 0.0, 0.01), 20);
        let d = decide(&flat, None, &cfg());
        assert!(!d.promote && d.reason.contains("likely real"), "{}", d.reason);
    }

    /// With `env.reward = differential-sharpe` the no-champion rule asks for buy-and-hold's Sharpe (plus the
    /// margin) and a lead over cash, not a lead over buy-and-hold's returns; with a return reward, the reverse.
    #[test]
    fn without_a_champion_better_means_what_the_training_reward_means() {
        let sharpe = GateConfig { objective: Objective::Sharpe, ..cfg() };
        // A steady candidate: Sharpe far above buy-and-hold's, but returns that do not beat buy-and-hold's.
        let mut c = g(normal(3, 250, 0.003, 0.01), 20);
        c.buy_hold_returns = c.returns.iter().map(|r| r + 0.002).collect();
        c.buy_hold_sharpe = c.sharpe - 0.5;
        let d = decide(&c, None, &sharpe);
        assert!(d.promote, "{}", d.reason);
        assert!(d.reason.contains("beats buy-and-hold's") && !d.numbers.contains_key("confidence_vs_buy_hold"));
        let d = decide(&c, None, &cfg());
        assert!(!d.promote && d.reason.contains("buy_hold"), "a return reward needs the lead: {}", d.reason);
        c.buy_hold_sharpe = c.sharpe - 0.05;
        let d = decide(&c, None, &sharpe);
        assert!(!d.promote && d.reason.contains("does not beat buy-and-hold's"), "{}", d.reason);
        // The config says it once: env.reward sets the gate's objective.
        let text = "[market]\nsymbols = [\"AAPL\"]\n[env]\nreward = \"differential-sharpe\"\n";
        let parsed = crate::config::Config::parse(std::path::Path::new("t.toml"), text);
        assert_eq!(parsed.map(|c| c.retrain.gate.objective).ok(), Some(Objective::Sharpe));
    }

    #[test]
    fn caps_minimums_buy_and_hold_and_missing_returns_refuse() {
        let mut c = g(normal(3, 250, 0.003, 0.01), 20);
        c.max_drawdown = 0.4;
        assert!(decide(&c, None, &cfg()).reason.contains("exceeds the cap"));
        let c = g(normal(3, 250, 0.003, 0.01), 2);
        assert!(decide(&c, None, &cfg()).reason.contains("fewer than the minimum 5"));
        // 31.2% against buy-and-hold's 41.2%: refused, however it compares with the champion.
        let mut c = g(normal(3, 250, 0.003, 0.01), 20);
        (c.total_return, c.buy_hold_return) = (0.312, 0.412);
        let d = decide(&c, None, &cfg());
        assert!(!d.promote && d.reason.contains("trails buy-and-hold"), "{}", d.reason);
        let mut c = g(normal(3, 250, 0.003, 0.01), 20);
        c.returns.clear();
        let d = decide(&c, Some(&g(normal(1, 250, 0.0, 0.01), 20)), &cfg());
        assert!(!d.promote && d.reason.contains("cannot be told from noise"), "{}", d.reason);
    }

    #[test]
    fn non_finite_figures_never_promote() {
        let mut c = g(normal(3, 250, 0.003, 0.01), 20);
        c.sharpe = f64::NAN;
        assert!(!decide(&c, None, &cfg()).promote);
        let mut c = g(normal(3, 250, 0.003, 0.01), 20);
        c.returns[7] = f64::INFINITY;
        assert!(!decide(&c, None, &cfg()).promote);
    }
}
