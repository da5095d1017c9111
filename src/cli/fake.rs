//! `tradebot fake-alpaca`: runs the fake Alpaca server (see `alpaca::fake`) until Ctrl-C, so a daemon can
//! be pointed at it by config. Prints the URLs and keys to put in the config / environment, and with
//! `--market` the simulated clock the daemon must share (`TRADEBOT_SIM_CLOCK`).

use crate::alpaca::fake::{FakeAlpaca, KEY_ID, MarketSpec, SECRET_KEY};
use crate::clock::SimClock;
use crate::out::{out, outln};
use anyhow::{Context, bail};
use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct FakeArgs {
    /// The port to listen on, on 127.0.0.1 (0: any free port; the address is printed at start).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Symbols the fake trades (comma-separated), each optionally with its starting price: `AAPL=190`.
    /// Names with a slash (`BTC/USD`) are crypto and trade around the clock.
    #[arg(long, value_delimiter = ',', default_value = "AAPL,MSFT,IBM,BTC/USD=90000")]
    symbols: Vec<String>,
    /// The starting price of symbols given without one.
    #[arg(long, default_value = "100")]
    price: Decimal,
    /// Run a synthetic market: seeded minute bars on the stream and in the REST history, orders filling
    /// at the next bar's open. Without it the fake serves no bars and fills at `--price`.
    #[arg(long)]
    market: bool,
    /// The market's random seed: the same seed, symbols and start give the same bars.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated minutes per wall-clock second (1/60 is real time). Anything else runs a simulated clock
    /// that the daemon must share: the fake prints the `TRADEBOT_SIM_CLOCK` line to export.
    #[arg(long)]
    speed: Option<f64>,
    /// Simulated time at start (RFC 3339). Default: now, or with `--speed` five minutes before the next
    /// session opens when the market is closed now.
    #[arg(long)]
    start: Option<DateTime<Utc>>,
    /// Days of minute history the REST API serves before the start.
    #[arg(long, default_value_t = 30)]
    history_days: i64,
}

/// `AAPL=190` → ("AAPL", 190); `AAPL` → ("AAPL", default).
fn symbol_price(text: &str, default: Decimal) -> anyhow::Result<(String, Decimal)> {
    let (sym, price) = match text.split_once('=') {
        Some((s, p)) => {
            let p: Decimal = p.trim().parse().with_context(|| format!("--symbols {text}: {p:?} is not a price"))?;
            (s, p)
        }
        None => (text, default),
    };
    let sym = sym.trim().to_ascii_uppercase();
    if sym.is_empty() || price <= Decimal::ZERO {
        bail!("--symbols {text}: give SYMBOL or SYMBOL=PRICE with a price above zero");
    }
    Ok((sym, price))
}

/// The simulated clock for `--speed` / `--start`, or `None` for the wall clock.
fn sim_clock(args: &FakeArgs) -> anyhow::Result<Option<SimClock>> {
    if args.speed.is_none() && args.start.is_none() {
        return Ok(None);
    }
    let start = args.start.unwrap_or_else(|| {
        let now = Utc::now();
        let cal = crate::calendar::Calendar::shipped();
        match cal.session_at_or_after(now) {
            Some((open, _)) if open > now => open - Duration::minutes(5),
            _ => now,
        }
    });
    // Per wall second; 1/60 (one simulated second per second) is the wall clock's own pace.
    Ok(Some(SimClock::starting(start, args.speed.unwrap_or(1.0 / 60.0))?))
}

pub(super) fn run(args: &FakeArgs) -> anyhow::Result<ExitCode> {
    let symbols: Vec<(String, Decimal)> =
        args.symbols.iter().map(|s| symbol_price(s, args.price)).collect::<anyhow::Result<_>>()?;
    let clock = if args.market { sim_clock(args)? } else { None };
    if !args.market && (args.speed.is_some() || args.start.is_some()) {
        bail!("--speed and --start drive the synthetic market: add --market");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let port = args.port;
    rt.block_on(async {
        let fake = FakeAlpaca::start(port).await.with_context(|| format!("listening on 127.0.0.1:{port}"))?;
        for (s, p) in &symbols {
            fake.set_price(s, *p);
        }
        outln!("fake Alpaca listening on {}; for the config (crypto streams on v1beta3/crypto/us):", fake.addr)?;
        out!("{}", fake.alpaca_section("v2/iex"))?;
        outln!("  export APCA_API_KEY_ID={KEY_ID} APCA_API_SECRET_KEY={SECRET_KEY}")?;
        if args.market {
            let spec = MarketSpec {
                seed: args.seed,
                symbols: symbols.iter().map(|(s, p)| (s.clone(), p.to_f64().unwrap_or(100.0))).collect(),
                history_days: args.history_days,
                quiet: Default::default(),
            };
            let names: Vec<&str> = symbols.iter().map(|(s, _)| s.as_str()).collect();
            outln!(
                "  market: {} (seed {}), {} days of minute history",
                names.join(", "),
                args.seed,
                args.history_days
            )?;
            match clock {
                Some(c) => {
                    outln!("  simulated clock from {} at {} minutes per second; for the daemon:", c.sim, c.speed)?;
                    outln!("  export {}={c}", crate::clock::ENV)?;
                    if crate::clock::from_env().ok().flatten().is_some_and(|old| old != c) {
                        outln!(
                            "  (this shell's {} names an earlier clock: export the line above again)",
                            crate::clock::ENV
                        )?;
                    }
                }
                None => outln!("  on the wall clock")?,
            }
            fake.run_market(spec, clock);
        }
        tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_may_carry_its_price_and_a_bad_one_is_named() {
        let d = Decimal::from(100);
        assert_eq!(symbol_price("aapl", d).unwrap(), ("AAPL".into(), d));
        assert_eq!(symbol_price("BTC/USD=90000", d).unwrap(), ("BTC/USD".into(), Decimal::from(90_000)));
        let e = symbol_price("MSFT=abc", d).unwrap_err().to_string();
        assert!(e.contains("MSFT=abc") && e.contains("not a price"), "{e}");
        let e = symbol_price("IBM=-1", d).unwrap_err().to_string();
        assert!(e.contains("above zero"), "{e}");
    }
}
