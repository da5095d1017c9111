//! What the bot understands and what it answers from the dashboard's data (the same figures as the
//! dashboard, `tradebot status` and `/metrics`): money in dollars to the cent.

use crate::control::Request;
use crate::models::ModelKind;
use crate::web::data::DashboardData;
use chrono::{DateTime, Duration, Utc};
use std::fmt::Write as _;

/// A command sent to the bot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BotCommand {
    Help,
    Status,
    Positions,
    Balance,
    /// Over the last `days` days (equity curve and closed trades).
    Profit {
        days: u32,
    },
    Models,
    /// Goes to the daemon as it is (pause, resume, retrain).
    Control(Request),
    /// Asks for a confirmation first.
    Flatten,
}

pub(crate) const HELP: &str = "tradebot commands:\n/status: mode, feed, equity, today's P&L, risk\n/positions: what is held\n\
/balance: equity, cash, invested\n/profit [days]: P&L over the last days (default 7)\n/models: champions and the last retrain\n\
/pause: no new orders\n/resume: trade again\n/flatten: sell every position, then pause (asks first)\n\
/retrain [ppo|lstm]: retrain now\n/help: this list";

/// Why a message is not a command the bot knows; the message says what to send instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum ParseError {
    /// The message does not start with `/`.
    #[error("commands start with /: send /help")]
    NoSlash,
    /// `/profit`'s argument is not a number of days from 1 to 3650.
    #[error("/profit {0}: give a number of days from 1 to 3650, e.g. /profit 30")]
    Days(String),
    /// `/retrain`'s argument is not a model kind.
    #[error("/retrain {0}: ppo or lstm")]
    Kind(String),
    /// No command of that name.
    #[error("/{0} is not a command: send /help")]
    Unknown(String),
}

/// The command in `text` (`/name args`, a `@botname` suffix allowed), or why it is not one.
pub(crate) fn parse(text: &str) -> Result<BotCommand, ParseError> {
    let mut words = text.split_whitespace();
    let head = words.next().unwrap_or("");
    let name = head.strip_prefix('/').ok_or(ParseError::NoSlash)?;
    let name = name.split('@').next().unwrap_or("").to_ascii_lowercase();
    let arg = words.next();
    Ok(match name.as_str() {
        "help" | "start" => BotCommand::Help,
        "status" => BotCommand::Status,
        "positions" => BotCommand::Positions,
        "balance" => BotCommand::Balance,
        "profit" => {
            let days = match arg {
                None => 7,
                Some(a) => a
                    .parse::<u32>()
                    .ok()
                    .filter(|d| (1..=3650).contains(d))
                    .ok_or_else(|| ParseError::Days(a.to_string()))?,
            };
            BotCommand::Profit { days }
        }
        "models" => BotCommand::Models,
        "pause" => BotCommand::Control(Request::Pause),
        "resume" => BotCommand::Control(Request::Resume),
        "flatten" => BotCommand::Flatten,
        "retrain" => {
            let kind = match arg {
                None => None,
                Some(a) => Some(a.parse::<ModelKind>().map_err(|_| ParseError::Kind(a.to_string()))?),
            };
            BotCommand::Control(Request::Retrain { kind })
        }
        other => return Err(ParseError::Unknown(other.to_string())),
    })
}

fn usd(x: f64) -> String {
    let sign = if x < 0.0 { "-" } else { "" };
    format!("{sign}${:.2}", x.abs())
}

pub(crate) fn status(d: &DashboardData) -> String {
    let s = &d.status;
    let feed = if s.feed.connected { "connected" } else { "disconnected" };
    let mut out = format!(
        "{} ({}): {}\nfeed {} {feed}, {} bars\nequity {}, today {}\n",
        s.mode,
        if s.daemon_running { "running" } else { "not running" },
        s.activity,
        s.feed.kind,
        s.feed.bars_received,
        usd(s.equity),
        usd(s.pnl_today)
    );
    if s.risk.kill_switch {
        let why = s.risk.kill_reason.as_deref().unwrap_or("no reason recorded");
        let _ = writeln!(out, "KILL SWITCH TRIPPED: {why}");
    }
    if s.risk.paused {
        out.push_str("paused: no new orders until /resume\n");
    }
    let _ = write!(out, "{} positions, {} open orders", s.positions.len(), s.open_orders.len());
    out
}

pub(crate) fn positions(d: &DashboardData) -> String {
    if d.status.positions.is_empty() {
        return "no positions".to_string();
    }
    let lines: Vec<String> = d
        .status
        .positions
        .iter()
        .map(|p| format!("{} {} @ {} = {}", p.symbol, p.qty, usd(p.price), usd(p.value)))
        .collect();
    lines.join("\n")
}

pub(crate) fn balance(d: &DashboardData) -> String {
    let s = &d.status;
    let invested: f64 = s.positions.iter().map(|p| p.value).sum();
    format!("equity {}\ncash {}\ninvested {}", usd(s.equity), usd(s.cash), usd(invested))
}

/// The equity change over the last `days` days of the equity curve (from its last point back), and the
/// closed trades that ended in them.
pub(crate) fn profit(d: &DashboardData, days: u32) -> String {
    let Some(last) = d.equity.last() else {
        return "no equity recorded yet".to_string();
    };
    let since: DateTime<Utc> = last.t - Duration::days(i64::from(days));
    let first = d.equity.iter().find(|p| p.t >= since).unwrap_or(last);
    let change = last.equity - first.equity;
    let pct = if first.equity != 0.0 { change / first.equity * 100.0 } else { 0.0 };
    let trades: Vec<_> = d.trades.iter().filter(|t| t.exit_time >= since).collect();
    let realised: f64 = trades.iter().map(|t| t.pnl).sum();
    let fees: f64 = trades.iter().map(|t| t.fees).sum();
    let wins = trades.iter().filter(|t| t.pnl > 0.0).count();
    format!(
        "last {days} days ({} to {}): equity {} to {} ({}{}, {pct:+.2}%)\n{} closed trades, {wins} won: {} realised, {} fees",
        first.t.format("%Y-%m-%d"),
        last.t.format("%Y-%m-%d"),
        usd(first.equity),
        usd(last.equity),
        if change >= 0.0 { "+" } else { "" },
        usd(change),
        trades.len(),
        usd(realised),
        usd(fees)
    )
}

pub(crate) fn models(d: &DashboardData) -> String {
    let m = &d.status.models;
    let mut out = format!(
        "ppo champion: {}\nlstm champion: {}",
        m.ppo.as_deref().unwrap_or("none"),
        m.lstm.as_deref().unwrap_or("none")
    );
    if let Some(k) = &m.retraining {
        let _ = write!(out, "\nretraining {k} now");
    }
    if let Some(r) = &m.last_retrain {
        let _ = write!(out, "\nlast retrain: {} ({})", r.outcome, r.reason);
    }
    if let Some(t) = m.next_retrain {
        let _ = write!(out, "\nnext retrain: {}", t.format("%Y-%m-%d %H:%M UTC"));
    }
    out
}
