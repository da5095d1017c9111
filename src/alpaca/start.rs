//! The Alpaca account at start: read with backoff through an outage (never past `alpaca.start_retry_secs`),
//! refused at once on bad keys, logged (paper or LIVE, cash and equity) before anything trades, and a
//! blocked account refused.

use super::rest::{GetAccount, RestClient};
use crate::config::{Config, Mode};
use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

/// The account we are about to trade, logged (paper or LIVE); a blocked one is refused.
pub(crate) async fn check_account(
    rest: &RestClient,
    config: &Config,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let backoff = super::backoff::Backoff::STREAM;
    let account = account_at_start(rest, config.alpaca.start_retry, backoff, shutdown)
        .await
        .context("reading the Alpaca account: check the API keys and alpaca.trading_url")?;
    log::warn!(
        "tradebot run: trading the Alpaca {} account {} at {} (status {}, cash {}, equity {})",
        if config.mode == Mode::Live { "LIVE (real money)" } else { "paper" },
        account.id,
        config.alpaca.trading_url,
        account.status,
        account.cash.round_dp(2),
        account.equity.round_dp(2)
    );
    if account.blocked {
        bail!(
            "Alpaca account {} is blocked for trading (status {}): see Alpaca's dashboard",
            account.id,
            account.status
        );
    }
    Ok(())
}

/// The account call at start, retried with backoff through outages (5xx, timeouts, dropped
/// connections, 429s) until `deadline` (`alpaca.start_retry_secs`) has passed; refusals (bad keys) fail
/// at once. Logged once when it starts waiting and once when the account answers.
async fn account_at_start(
    rest: &RestClient,
    deadline: std::time::Duration,
    backoff: super::backoff::Backoff,
    shutdown: &CancellationToken,
) -> anyhow::Result<super::model::Account> {
    let started = tokio::time::Instant::now();
    let mut attempt = 0u32;
    loop {
        let err = match rest.issue::<GetAccount>(&()).await {
            Ok(a) => {
                if attempt > 0 {
                    log::info!("tradebot run: Alpaca answered after {:.0} s", started.elapsed().as_secs_f64());
                }
                return Ok(a);
            }
            Err(e) => e,
        };
        let transient = err.is_ambiguous() || matches!(err, super::rest::RestError::RateLimited { .. });
        let wait = backoff.delay(attempt);
        if !transient || started.elapsed() + wait > deadline {
            return Err(err.into());
        }
        if attempt == 0 {
            log::warn!(
                "tradebot run: Alpaca is not answering ({err}); retrying for up to {} s (alpaca.start_retry_secs)",
                deadline.as_secs()
            );
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.cancelled() => anyhow::bail!("stopped while waiting for Alpaca ({err})"),
        }
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alpaca::backoff::Backoff;
    use crate::alpaca::fake::{FakeAlpaca, Fault};
    use crate::alpaca::rest::{RestConfig, RetryPolicy};
    use rust_decimal::Decimal;
    use std::time::Duration as StdDuration;

    /// The REST client start-up uses, against the fake: its default retry policy and timeout.
    fn client(fake: &FakeAlpaca, key: &str) -> RestClient {
        RestClient::new(RestConfig { key_id: crate::config::Secret::new(key), ..fake.rest_config() }).unwrap()
    }

    /// On paused time, with the daemon's own delays: `alpaca.start_retry_secs`' default (300 s), the
    /// streams' backoff `check_account` passes (0.5 s doubling to 60 s) and the REST retry policy's.
    #[tokio::test(start_paused = true)]
    async fn start_up_waits_out_an_outage_but_not_bad_keys() {
        let fake = FakeAlpaca::start(0).await.unwrap();
        let deadline = StdDuration::from_secs(300);
        let backoff = Backoff::STREAM;
        for _ in 0..5 {
            fake.push_fault(Fault::ServerError);
        }
        let never = CancellationToken::new();
        let rest = client(&fake, crate::alpaca::fake::KEY_ID);
        let a = account_at_start(&rest, deadline, backoff, &never).await.unwrap();
        assert!(a.cash > Decimal::ZERO);
        assert_eq!(fake.count("GET", "/v2/account"), 6, "five 503s, then the answer");

        let bad = client(&fake, "WRONGKEY");
        let e = account_at_start(&bad, deadline, backoff, &never).await.unwrap_err();
        assert!(e.to_string().contains("not authorized"), "{e}");
        assert_eq!(fake.count("GET", "/v2/account"), 7, "bad keys are not retried");

        // Past the deadline it gives up with the last error, within one call (its trading deadline) of it.
        for _ in 0..1000 {
            fake.push_fault(Fault::ServerError);
        }
        let started = tokio::time::Instant::now();
        let e = account_at_start(&rest, deadline, backoff, &never).await.unwrap_err();
        assert!(e.to_string().contains("500"), "{e}");
        let call = RetryPolicy::default().trading_deadline;
        assert!(started.elapsed() < deadline + call, "{:?}", started.elapsed());
        assert!(
            started.elapsed() > deadline - backoff.max,
            "it kept trying until the deadline: {:?}",
            started.elapsed()
        );
        assert!(!fake.lock().faults.is_empty(), "every try was a 500, none an answer");
    }
}
