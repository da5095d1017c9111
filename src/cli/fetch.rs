//! `tradebot data fetch`: downloads missing bars from Alpaca's data REST API into the store, with a
//! progress line on a terminal.

use super::load_config;
use crate::alpaca::history::{HistoryRequest, fetch_missing};
use crate::alpaca::rest::{RestClient, RestConfig};
use crate::config::Credentials;
use crate::data::daily_bar_time;
use crate::domain::{Symbol, Timeframe};
use crate::out::{err, errln, outln};
use crate::store::Store;
use anyhow::{Context, anyhow};
use chrono::{Duration, NaiveDate};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `tradebot data fetch`.
#[derive(Debug, clap::Args)]
pub struct FetchArgs {
    /// The symbols to download (comma-separated), e.g. AAPL,MSFT.
    #[arg(long, value_delimiter = ',', required = true)]
    pub symbols: Vec<String>,
    /// The bars' timeframe (1Day, 1Hour, 15Min, 1Min, ...).
    #[arg(long, default_value = "1Day")]
    pub timeframe: String,
    /// First day (YYYY-MM-DD), inclusive.
    #[arg(long)]
    pub from: String,
    /// Last day (YYYY-MM-DD), inclusive.
    #[arg(long)]
    pub to: String,
    /// Stock feed for the REST API: iex (free plan) or sip.
    #[arg(long)]
    pub feed: Option<String>,
    /// The configuration file (default: $TRADEBOT_CONFIG, ./config/tradebot.toml, /etc/tradebot/tradebot.toml).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
}

fn day(flag: &str, s: &str) -> anyhow::Result<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| anyhow!("{flag} {s:?} is not a date: write YYYY-MM-DD"))
}

pub(super) fn run(args: FetchArgs) -> anyhow::Result<ExitCode> {
    let config = load_config(args.config)?;
    let creds = Credentials::load()?.context("no Alpaca keys: set APCA_API_KEY_ID and APCA_API_SECRET_KEY")?;
    let (from, to) = (day("--from", &args.from)?, day("--to", &args.to)?);
    let req = HistoryRequest {
        symbols: args.symbols.iter().map(|s| Symbol::new(s)).collect::<Result<_, _>>().context("--symbols")?,
        timeframe: Timeframe::parse(&args.timeframe).context("--timeframe")?,
        from: daily_bar_time(from),
        to: daily_bar_time(to + Duration::days(1)) - Duration::seconds(1),
        feed: args.feed,
    };
    let store = Store::open(&config.state_dir).context("opening the store")?;
    let rest = RestClient::new(RestConfig::from_config(&config.alpaca, &creds))?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let tty = std::io::stderr().is_terminal();
    let fetched = rt.block_on(fetch_missing(&rest, &store, &req, |sym, done, total| {
        if tty {
            err!("\r[{done}/{total}] {sym:<12}");
        }
    }))?;
    if tty {
        errln!();
    }
    for f in &fetched {
        outln!("{}: {} bars received, {} new (from {})", f.symbol, f.received, f.new, f.start)?;
    }
    Ok(ExitCode::SUCCESS)
}
