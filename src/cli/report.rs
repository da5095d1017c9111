//! `tradebot report`: the paper or live account's own history over a period (a replay's too), from the
//! engine's account store (`backtest::account`): the figures beside buy-and-hold, or JSON, a tear sheet
//! like the backtest's (`--report`) and the fills as CSV (`--trades`). Beside a running daemon it reads
//! the daemon's read snapshot of that store.

use super::load_config;
use crate::backtest::account::{self, AccountReport};
use crate::backtest::tearsheet::trades_csv;
use crate::out::{OutError, outln};
use anyhow::Context;
use chrono::NaiveDate;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// First day (YYYY-MM-DD); default: the account's first decision.
    #[arg(long)]
    pub from: Option<NaiveDate>,
    /// Last day (YYYY-MM-DD), included; default: its last.
    #[arg(long)]
    pub to: Option<NaiveDate>,
    /// The report as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write a tear sheet to this HTML file: the equity against buy-and-hold and cash, the drawdown, the
    /// monthly returns, the rolling Sharpe, per-symbol figures, the fills and the config, with the
    /// report's JSON embedded.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Write the period's fills to this CSV file (time, symbol, side, qty, price, notional, client_order_id).
    #[arg(long, value_name = "FILE.csv")]
    pub trades: Option<PathBuf>,
}

pub(super) fn run(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(a.config)?;
    if let (Some(f), Some(t)) = (a.from, a.to)
        && f > t
    {
        anyhow::bail!("the report's period {f} to {t} is reversed: --from is after --to; swap them");
    }
    let dir = account::account_dir(&config);
    if !dir.is_dir() {
        anyhow::bail!(
            "no {} account in {}: the daemon has not traded with this config yet (`tradebot run`)",
            account::account_kind(&config),
            dir.display()
        );
    }
    let store = crate::control::beside::open_account_to_read(&config.state_dir, &dir)
        .with_context(|| format!("opening the account store {}", dir.display()))?;
    let (from, to) = crate::data::day_window(a.from, a.to);
    let report = account::report(&config, &store, from, to)?;
    let json = serde_json::to_string(&report)?;
    if let Some(path) = &a.trades {
        std::fs::write(path, trades_csv(&report.fill_records))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.report {
        std::fs::write(path, account::tear_sheet(&config, &report, &json))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        outln!("{json}")?;
    } else {
        print_report(&report)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(r: &AccountReport) -> Result<(), OutError> {
    let day = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.date_naive().to_string()).unwrap_or_default();
    outln!("the {} account, {} to {}: {} bars, {} fills", r.account, day(r.from), day(r.to), r.bars, r.fills)?;
    outln!("traded ${}, fees ${}", crate::domain::money(r.notional), crate::domain::money(r.fees))?;
    outln!("models: {}", if r.models.is_empty() { "none".to_string() } else { r.models.join(", ") })?;
    outln!("{:<14} {:>12} {:>12}", "", "account", "buy&hold")?;
    let rows = super::backtest::metric_rows();
    for (name, f) in rows {
        outln!("{:<14} {:>12} {:>12}", name, f(&r.strategy), f(&r.buy_hold))?;
    }
    Ok(())
}
