//! The account's own history as a tear sheet (`tradebot report`, the dashboard's `/report`): the fills and
//! the engine's decision records over a period, read from the engine's account store (live and paper the
//! state directory's, a replay's `state_dir/replay`). Each decision holds the cash, the holdings and the
//! closes the engine saw at a bar, so the equity curve is the account's own (positions outside
//! `market.symbols` are not in it). Buy-and-hold puts the period's first equity in equal parts into the
//! symbols at their first closes, without fees. Fees are `env.exec.fee_bps` of each fill's notional: what
//! the simulated broker charges (a replay), an estimate for an Alpaca account.

use super::{Activity, BacktestReport, EquityPoint, Performance, metrics, periods_per_year};
use crate::config::{Config, StrategyMode};
use crate::engine::DecisionRecord;
use crate::oms::FillRecord;
use crate::store::keys::time_key;
use crate::store::{Store, StoreError, TreeName, TypedTree};
use chrono::{DateTime, Utc};
use rust_decimal::prelude::ToPrimitive;
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub(crate) enum AccountError {
    #[error("reading the account's records in {dir}: {source}")]
    Store {
        dir: String,
        #[source]
        source: StoreError,
    },
    #[error(
        "the {account} account in {dir} has no decisions {span} ({stored}): pick days it traded, or run the daemon first"
    )]
    Empty { account: String, dir: String, span: String, stored: String },
}

/// What `tradebot report --json` prints and its tear sheet embeds: the period, the fills (how many, their
/// notional, their fees), the models the engine decided with, and the metrics of the account beside
/// buy-and-hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AccountReport {
    /// "replay", "paper" or "live".
    pub account: String,
    /// The account store's directory.
    pub store: String,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// Decisions (bars) in the period.
    pub bars: usize,
    pub fills: usize,
    /// Traded notional, dollars.
    pub notional: f64,
    /// Fees at `env.exec.fee_bps`, dollars.
    pub fees: f64,
    /// The models the engine decided with, in the order they first traded.
    pub models: Vec<String>,
    pub strategy: Performance,
    pub buy_hold: Performance,
    #[serde(skip)]
    pub mode: StrategyMode,
    #[serde(skip)]
    pub curve: Vec<EquityPoint>,
    #[serde(skip)]
    pub fill_records: Vec<FillRecord>,
}

impl AccountReport {
    /// The report in the backtest's shape, for its tear sheet (`tearsheet::sheet`).
    pub(crate) fn as_sheet(&self) -> BacktestReport {
        BacktestReport {
            model_id: self.models.join(", "),
            mode: self.mode,
            from: self.from,
            to: self.to,
            bars: self.bars,
            strategy: self.strategy,
            buy_hold: self.buy_hold,
            refusals: Default::default(),
            curve: self.curve.clone(),
            fills: self.fill_records.clone(),
        }
    }
}

/// The account report as a tear sheet: `json` is the report as `tradebot report --json` prints it
/// (embedded as it is), the config the one given.
pub(crate) fn tear_sheet(config: &Config, r: &AccountReport, json: &str) -> String {
    let day = |t: Option<DateTime<Utc>>| t.map(|t| t.date_naive().to_string()).unwrap_or_default();
    let (from, to) = (day(r.from), day(r.to));
    let models = if r.models.is_empty() { "none".to_string() } else { r.models.join(", ") };
    let head = super::tearsheet::Heading {
        title: format!("tradebot {} account {from} to {to}", r.account),
        heading: format!("The {} account, {from} to {to}", r.account),
        lead: format!(
            "{} bars and {} fills from the account's own records ({}); models {models}; fees at env.exec.fee_bps = {}.",
            r.bars, r.fills, r.store, config.env.exec.fee_bps
        ),
    };
    let ppy = periods_per_year(config.market.timeframe);
    super::tearsheet::sheet(&head, &r.as_sheet(), json, &config.to_toml(), config.env.exec.fee_bps, ppy)
}

/// What a run of the daemon with `config` trades: "replay", "paper" or "live".
pub(crate) fn account_kind(config: &Config) -> &'static str {
    match (config.feed.kind, config.mode) {
        (crate::config::FeedKind::Replay, _) => "replay",
        (_, crate::config::Mode::Live) => "live",
        _ => "paper",
    }
}

/// Where the engine of a daemon with `config` keeps its account: a replay's `state_dir/replay`, else the
/// state directory.
pub(crate) fn account_dir(config: &Config) -> std::path::PathBuf {
    match config.feed.kind {
        crate::config::FeedKind::Replay => config.state_dir.join("replay"),
        _ => config.state_dir.clone(),
    }
}

/// The account in `store` (the engine's account store of `config`, or a read snapshot of it) from `from`
/// to `to` (both included).
pub(crate) fn report(
    config: &Config,
    store: &Store,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<AccountReport, AccountError> {
    // Named as the account's own directory even when `store` is a daemon's read snapshot of it.
    let dir = account_dir(config).display().to_string();
    let failed = |source| AccountError::Store { dir: dir.clone(), source };
    let tree = store.tree::<DecisionRecord>(TreeName::Decisions).map_err(failed)?;
    let decisions = decisions_in(&tree, from, to).map_err(failed)?;
    let kind = account_kind(config).to_string();
    if decisions.is_empty() {
        let stored = stored_span(&tree).map_err(failed)?;
        return Err(AccountError::Empty { account: kind, dir, span: asked_span(from, to), stored });
    }
    let fills_tree = store.tree::<FillRecord>(TreeName::Fills).map_err(failed)?;
    let mut fills: Vec<FillRecord> = fills_tree
        .scan_prefix(b"")
        .map_err(failed)?
        .into_iter()
        .map(|(_, f)| f)
        .filter(|f| f.time >= from && f.time <= to)
        .collect();
    fills.sort_by_key(|f| f.time);
    let fee_bps = config.env.exec.fee_bps;
    let notional: f64 = fills.iter().map(notional_of).sum();
    let fees: f64 = fills.iter().map(|f| notional_of(f) * fee_bps / 10_000.0).sum();
    let (curve, exposure_sum) = curve_of(&decisions, &fills, fee_bps);
    let ppy = periods_per_year(config.market.timeframe);
    let strategy_curve: Vec<_> = curve.iter().map(|p| (p.t, p.equity)).collect();
    let bh_curve: Vec<_> = curve.iter().map(|p| (p.t, p.buy_hold)).collect();
    let act = Activity { traded_notional: notional, trades: fills.len(), fees, exposure_sum };
    Ok(AccountReport {
        account: kind,
        store: dir,
        from: curve.first().map(|p| p.t),
        to: curve.last().map(|p| p.t),
        bars: curve.len(),
        fills: fills.len(),
        notional,
        fees,
        models: models_of(&decisions),
        strategy: metrics(&strategy_curve, ppy, act),
        buy_hold: metrics(&bh_curve, ppy, Activity { exposure_sum: curve.len() as f64, ..Default::default() }),
        mode: decisions.last().map_or(config.strategy.mode, |d| d.mode),
        curve,
        fill_records: fills,
    })
}

/// The decision records from `from` to `to`, in time order, one a bar: a bar decided again (a restart)
/// counts once, as last decided.
fn decisions_in(
    tree: &TypedTree<DecisionRecord>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<DecisionRecord>, StoreError> {
    let mut hi = time_key(to).to_vec();
    hi.extend_from_slice(&[0xff; 32]);
    let mut decisions: Vec<DecisionRecord> = tree.range(&time_key(from), &hi)?.into_iter().map(|(_, d)| d).collect();
    decisions.sort_by_key(|d| d.t);
    decisions.reverse();
    decisions.dedup_by_key(|d| d.t);
    decisions.reverse();
    Ok(decisions)
}

fn day(t: DateTime<Utc>) -> String {
    t.with_timezone(&chrono_tz::America::New_York).date_naive().to_string()
}

/// What the account holds, for the error of an empty period.
fn stored_span(tree: &TypedTree<DecisionRecord>) -> Result<String, StoreError> {
    let all = tree.scan_prefix(b"")?;
    Ok(match (all.iter().map(|(_, d)| d.t).min(), all.iter().map(|(_, d)| d.t).max()) {
        (Some(a), Some(z)) => format!("its decisions run from {} to {}", day(a), day(z)),
        _ => "it has none".to_string(),
    })
}

/// The period asked for, in words. The open ends of `data::day_window` (years 1800 and 2300) are not days
/// anyone asked for.
fn asked_span(from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    use chrono::Datelike;
    match (from.year() > 1800, to.year() < 2300) {
        (true, true) => format!("from {} to {}", day(from), day(to)),
        (true, false) => format!("from {} on", day(from)),
        (false, true) => format!("up to {}", day(to)),
        (false, false) => "at all".to_string(),
    }
}

fn notional_of(f: &FillRecord) -> f64 {
    (f.qty * f.price).to_f64().unwrap_or(0.0)
}

/// The equity curve a decision a bar (equity, cash, equal-weight buy-and-hold from the first bar's
/// equity, fills and fees so far) and the sum of the bars' exposures.
fn curve_of(decisions: &[DecisionRecord], fills: &[FillRecord], fee_bps: f64) -> (Vec<EquityPoint>, f64) {
    let equity_of = |d: &DecisionRecord| d.cash + d.holdings.iter().zip(&d.closes).map(|(h, c)| h * c).sum::<f64>();
    let e0 = decisions.first().map_or(0.0, equity_of);
    let base: Vec<(usize, f64)> = decisions
        .first()
        .map(|d| d.closes.iter().copied().enumerate().filter(|(_, c)| *c > 0.0).collect())
        .unwrap_or_default();
    let buy_hold = |d: &DecisionRecord| {
        if base.is_empty() {
            return e0;
        }
        let growth: f64 = base.iter().map(|(k, c0)| d.closes.get(*k).map_or(1.0, |c| c / c0)).sum();
        e0 * growth / base.len() as f64
    };
    let (mut curve, mut exposure_sum, mut seen, mut fees_so_far) = (Vec::new(), 0.0, 0, 0.0);
    for d in decisions {
        while seen < fills.len() && fills[seen].time <= d.t {
            fees_so_far += notional_of(&fills[seen]) * fee_bps / 10_000.0;
            seen += 1;
        }
        let equity = equity_of(d);
        if equity > 0.0 {
            exposure_sum += (equity - d.cash) / equity;
        }
        curve.push(EquityPoint {
            t: d.t,
            equity,
            cash: d.cash,
            buy_hold: buy_hold(d),
            trades: seen,
            fees: fees_so_far,
        });
    }
    (curve, exposure_sum)
}

/// The models the account traded with, in order of first use.
fn models_of(decisions: &[DecisionRecord]) -> Vec<String> {
    let mut models: Vec<String> = Vec::new();
    for d in decisions {
        for id in [&d.model_id, &d.lstm_model_id].into_iter().flatten() {
            if !models.contains(id) {
                models.push(id.clone());
            }
        }
    }
    models
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::domain::{ClientOrderId, Side, Symbol};
    use crate::store::TypedTree;
    use chrono::TimeZone;
    use rust_decimal::Decimal;

    fn decision(day: u32, cash: f64, held: f64, close: f64, model: &str) -> DecisionRecord {
        DecisionRecord {
            t: Utc.with_ymd_and_hms(2012, 3, day, 21, 0, 0).unwrap(),
            mode: StrategyMode::Ppo,
            model_id: Some(model.into()),
            lstm_model_id: None,
            cash,
            holdings: vec![held],
            closes: vec![close],
            obs_summary: [0.0; 4],
            actions: Vec::new(),
            probs: Vec::new(),
            orders: Vec::new(),
            note: None,
        }
    }

    fn fill(day: u32, side: Side, qty: &str, price: &str, n: u32) -> FillRecord {
        FillRecord {
            client_order_id: ClientOrderId::new(&format!("tb-ppo-AAPL-{n}-0")).unwrap(),
            symbol: Symbol::new("AAPL").unwrap(),
            side,
            qty: qty.parse::<Decimal>().unwrap(),
            price: price.parse::<Decimal>().unwrap(),
            cum_qty: qty.parse::<Decimal>().unwrap(),
            execution_id: None,
            time: Utc.with_ymd_and_hms(2012, 3, day, 21, 0, 0).unwrap(),
            synthesised: false,
        }
    }

    /// Three decisions of AAPL (1, 2 and 5 March 2012, two models) and two fills (a buy on the 2nd, a
    /// sell on the 9th), in `store`.
    pub(crate) fn sample(store: &Store) {
        let decisions: TypedTree<DecisionRecord> = store.tree(TreeName::Decisions).unwrap();
        let fills: TypedTree<FillRecord> = store.tree(TreeName::Fills).unwrap();
        let rows = [(1, 1000.0, 0.0, 10.0, "ppo-a"), (2, 500.0, 50.0, 11.0, "ppo-a"), (5, 500.0, 50.0, 12.0, "ppo-b")];
        for (day, cash, held, close, model) in rows {
            let d = decision(day, cash, held, close, model);
            let mut key = time_key(d.t).to_vec();
            key.extend_from_slice(b"ppo");
            decisions.insert(&key, &d).unwrap();
        }
        for (i, f) in [fill(2, Side::Buy, "50", "10", 1), fill(9, Side::Sell, "50", "13", 2)].iter().enumerate() {
            fills.insert(format!("f{i}").as_bytes(), f).unwrap();
        }
    }

    /// The demo config with one symbol, AAPL, and a fee of 10 bps.
    pub(crate) fn config(state_dir: &std::path::Path) -> Config {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/tradebot.toml");
        let mut config = Config::parse(&root, &std::fs::read_to_string(&root).unwrap()).unwrap();
        config.state_dir = state_dir.to_path_buf();
        config.market.symbols = vec![Symbol::new("AAPL").unwrap()];
        config.env.exec.fee_bps = 10.0;
        config
    }

    /// The curve is the decisions' cash and holdings at their closes; fills and fees are those of the
    /// period only; buy-and-hold follows the closes from the first equity.
    #[test]
    fn the_account_report_is_the_stored_decisions_and_fills_of_the_period() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let config = config(dir.path());
        sample(&store);
        let (from, to) = crate::data::day_window(
            chrono::NaiveDate::from_ymd_opt(2012, 3, 1),
            chrono::NaiveDate::from_ymd_opt(2012, 3, 5),
        );
        let r = report(&config, &store, from, to).unwrap();
        assert_eq!((r.bars, r.fills, r.models.clone()), (3, 1, vec!["ppo-a".to_string(), "ppo-b".to_string()]));
        assert_eq!((r.notional, r.fees), (500.0, 0.5), "the sell of the 9th is after the period");
        let eq: Vec<f64> = r.curve.iter().map(|p| p.equity).collect();
        assert_eq!(eq, [1000.0, 1050.0, 1100.0]);
        let bh: Vec<f64> = r.curve.iter().map(|p| p.buy_hold).collect();
        assert!((bh[1] - 1100.0).abs() < 1e-9 && (bh[2] - 1200.0).abs() < 1e-9, "{bh:?}");
        assert_eq!(r.curve.iter().map(|p| p.trades).collect::<Vec<_>>(), [0, 1, 1]);
        assert!((r.strategy.total_return - 0.10).abs() < 1e-12, "{:?}", r.strategy);
        assert_eq!((r.strategy.trades, r.strategy.fees), (1, 0.5));
        // A period without decisions names what is stored.
        let (from, to) = crate::data::day_window(chrono::NaiveDate::from_ymd_opt(2013, 1, 1), None);
        let e = report(&config, &store, from, to).unwrap_err().to_string();
        assert!(
            e.contains("no decisions from 2013-01-01 on (its decisions")
                && e.contains("run from 2012-03-01 to 2012-03-05"),
            "{e}"
        );
    }
}
