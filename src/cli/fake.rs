//! `tradebot fake-alpaca --port N`: runs the fake Alpaca server (see `alpaca::fake`) until Ctrl-C, so a
//! daemon can be pointed at it by config. Prints the URLs and keys to put in the config / environment.

use crate::alpaca::fake::{FakeAlpaca, KEY_ID, SECRET_KEY};
use anyhow::Context;
use rust_decimal::Decimal;
use std::process::ExitCode;

pub fn run(port: u16, symbols: &[String], price: Decimal) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let fake = FakeAlpaca::start(port).await.with_context(|| format!("listening on 127.0.0.1:{port}"))?;
        for s in symbols {
            fake.set_price(&s.to_ascii_uppercase(), price);
        }
        println!("fake Alpaca listening on {}", fake.addr);
        println!("  [alpaca] trading_url = \"{}\"", fake.http_url());
        println!("  [alpaca] data_url = \"{}\"", fake.http_url());
        println!("  [alpaca] stream_url = \"{}\"", fake.ws_url("v2/iex"));
        println!("  [alpaca] trade_updates_url = \"{}\"", fake.ws_url("stream"));
        println!("  APCA_API_KEY_ID={KEY_ID} APCA_API_SECRET_KEY={SECRET_KEY}");
        tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
        Ok(ExitCode::SUCCESS)
    })
}
