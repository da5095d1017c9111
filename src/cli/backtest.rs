//! `tradebot backtest`: the engine over stored bars with the SimBroker, for the champion PPO model or a
//! given one; prints the strategy's metrics next to buy-and-hold's (or JSON), stores the equity curve and
//! writes it as CSV on request.

use super::load_config;
use crate::backtest::{self, BacktestReport, Performance, Subject};
use crate::engine::StrategyMode;
use crate::models::Registry;
use crate::out::{OutError, outln};
use crate::policy::ModelSel;
use anyhow::Context;
use chrono::NaiveDate;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct BacktestArgs {
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// A model id (PPO or LSTM), `champion` (the default: the PPO champion, else the LSTM one) or
    /// `latest` (the model trained last, champion or not).
    #[arg(long)]
    pub model: Option<String>,
    /// ppo, lstm or ensemble; default: the model's kind. `ensemble` pairs the model with the champion of
    /// the other kind.
    #[arg(long)]
    pub strategy: Option<StrategyArg>,
    /// First day (YYYY-MM-DD); default: the first stored bar.
    #[arg(long)]
    pub from: Option<NaiveDate>,
    /// Last day (YYYY-MM-DD), included; default: the last stored bar.
    #[arg(long)]
    pub to: Option<NaiveDate>,
    /// The report (metrics of the strategy and of buy-and-hold) as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write the equity curve (time, equity, cash, buy_hold) to this CSV file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write a tear sheet to this HTML file: one self-contained page with the equity against buy-and-hold
    /// and cash, the drawdown, the monthly returns, the rolling Sharpe, per-symbol figures, the trades and
    /// the config, with the report's JSON embedded.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Write the fills to this CSV file (time, symbol, side, qty, price, notional, client_order_id).
    #[arg(long, value_name = "FILE.csv")]
    pub trades: Option<PathBuf>,
}

pub(super) fn run(a: BacktestArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(a.config)?;
    crate::runtime_libs::init_onnxruntime(config.runtime.onnxruntime_lib.as_deref())?;
    let store = crate::control::beside::open_or_snapshot(&config.state_dir).context("opening the store")?;
    crate::data::ensure_bars(&config, &store)?;
    let reg = Registry::open(&config.state_dir.join("models")).context("opening the model registry")?;
    let (first, last) = (a.from.or(config.feed.from), a.to.or(config.feed.to));
    if let (Some(f), Some(l)) = (first, last)
        && f > l
    {
        anyhow::bail!(
            "the backtest window {f} to {l} is reversed: its first day ({}) is after its last ({}); swap them",
            if a.from.is_some() { "--from" } else { "feed.from" },
            if a.to.is_some() { "--to" } else { "feed.to" }
        );
    }
    let (from, to) = crate::data::day_window(first, last);
    let subject = Subject { sel: ModelSel::parse(a.model.as_deref()), mode: a.strategy.map(StrategyArg::mode) };
    // Its errors name the window and the fix; "backtest" above them would add nothing.
    let report = backtest::run_subject(&config, &store, &reg, &subject, from, to)?;
    if let Some(path) = &a.csv {
        backtest::write_csv(path, &report.curve).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.trades {
        std::fs::write(path, backtest::tearsheet::trades_csv(&report.fills))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.report {
        let json = serde_json::to_string(&report)?;
        let ppy = backtest::periods_per_year(config.market.timeframe);
        let page = backtest::tearsheet::html(&report, &json, &config.to_toml(), config.env.exec.fee_bps, ppy);
        std::fs::write(path, &page).with_context(|| format!("writing {}", path.display()))?;
        // The dashboard links the last one (`/report/backtest`).
        backtest::tearsheet::keep_latest(&config.state_dir, &page);
    }
    if a.json {
        outln!("{}", serde_json::to_string(&report)?)?;
    } else {
        print_report(&report)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    Ppo,
    Lstm,
    Ensemble,
}

impl StrategyArg {
    fn mode(self) -> StrategyMode {
        match self {
            StrategyArg::Ppo => StrategyMode::Ppo,
            StrategyArg::Lstm => StrategyMode::Lstm,
            StrategyArg::Ensemble => StrategyMode::Ensemble,
        }
    }
}

/// A report line: its label and how to format it from a `Performance`.
pub(super) type Row = (&'static str, fn(&Performance) -> String);

/// The table's lines: a label and how to format it from a `Performance` (`backtest` and `report` print the same).
pub(super) fn metric_rows() -> [Row; 9] {
    [
        ("total return", |m| format!("{:.2}%", m.total_return * 100.0)),
        ("CAGR", |m| format!("{:.2}%", m.cagr * 100.0)),
        ("Sharpe", |m| format!("{:.3}", m.sharpe)),
        ("Sortino", |m| format!("{:.3}", m.sortino)),
        ("max drawdown", |m| format!("{:.2}%", m.max_drawdown * 100.0)),
        ("turnover", |m| format!("{:.2}", m.turnover)),
        ("trades", |m| m.trades.to_string()),
        ("fees", |m| format!("{:.2}", m.fees)),
        ("exposure", |m| format!("{:.1}%", m.exposure * 100.0)),
    ]
}

fn print_report(r: &BacktestReport) -> Result<(), OutError> {
    let day = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.date_naive().to_string()).unwrap_or_default();
    outln!("backtest of {} ({}) over {} bars, {} to {}", r.model_id, r.mode, r.bars, day(r.from), day(r.to))?;
    outln!("(full risk checks and the SimBroker, as the replay daemon trades)")?;
    outln!("{:<14} {:>12} {:>12} {:>12}", "", "strategy", "buy&hold", "cash")?;
    let cash = Performance::default();
    let rows = metric_rows();
    for (name, f) in rows {
        outln!("{:<14} {:>12} {:>12} {:>12}", name, f(&r.strategy), f(&r.buy_hold), f(&cash))?;
    }
    Ok(())
}
