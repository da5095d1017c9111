//! Alpaca's order rules per asset class, applied before the broker would apply them:
//! - the time in force of tradebot's orders (`tif_for`): `gtc` for crypto (Alpaca takes only `gtc` or
//!   `ioc` there), `day` for stocks (the only one for fractional and notional stock orders);
//! - crypto quantities in whole steps of the pair's `min_trade_increment` (the engine sizes with
//!   `order_qty`, which rounds down to them, so the approved order is the order sent);
//! - crypto's minimum order value of $1 (Alpaca: 403 "cost basis must be >= minimal amount of order 1").
//!
//! Crypto is never sold short: the long-only check in `checks` refuses every sell above the holding,
//! crypto's included (Alpaca has no crypto shorting).

use super::Refusal;
use super::context::AssetRules;
use crate::domain::{OrderTif, Symbol};
use rust_decimal::{Decimal, RoundingStrategy};
use std::collections::HashMap;

/// Alpaca refuses a crypto order worth less than this.
pub(crate) const CRYPTO_MIN_NOTIONAL: Decimal = Decimal::ONE;

/// Alpaca takes at most this many decimal places in a quantity.
const QTY_DP: u32 = 9;

fn rules_of(symbol: &Symbol, assets: Option<&HashMap<Symbol, AssetRules>>) -> AssetRules {
    assets.and_then(|a| a.get(symbol)).cloned().unwrap_or_else(|| AssetRules::assumed(symbol))
}

/// Whether `symbol` is crypto: its asset record says so, or its name is a pair (`BTC/USD`, Alpaca's
/// naming of crypto).
pub(crate) fn is_crypto(symbol: &Symbol, assets: Option<&HashMap<Symbol, AssetRules>>) -> bool {
    symbol.is_crypto() || rules_of(symbol, assets).crypto
}

/// The time in force of an order of `symbol` (`OrderTif::for_asset`): `gtc` for crypto, `day` for stocks.
/// `assets`: the asset rules the daemon read from Alpaca, where there are any.
pub(crate) fn tif_for(symbol: &Symbol, assets: Option<&HashMap<Symbol, AssetRules>>) -> OrderTif {
    OrderTif::for_asset(is_crypto(symbol, assets))
}

/// `qty` rounded down to what Alpaca takes: 9 decimal places, and whole steps of the symbol's
/// `min_trade_increment` where it has one.
pub(crate) fn order_qty(symbol: &Symbol, assets: Option<&HashMap<Symbol, AssetRules>>, qty: Decimal) -> Decimal {
    let q = qty.round_dp_with_strategy(QTY_DP, RoundingStrategy::ToZero);
    match rules_of(symbol, assets).min_trade_increment.filter(|s| *s > Decimal::ZERO) {
        Some(step) => ((q / step).trunc() * step).normalize(),
        None => q,
    }
}

/// The increment and minimum-value rules of `RiskChecks::check` (after the minimum order size).
pub(super) fn check(symbol: &Symbol, qty: Decimal, price: Decimal, rules: &AssetRules) -> Result<(), Refusal> {
    if let Some(step) = rules.min_trade_increment.filter(|s| *s > Decimal::ZERO)
        && !(qty % step).is_zero()
    {
        return Err(Refusal::QtyIncrement { symbol: symbol.clone(), qty, increment: step });
    }
    let notional = qty * price;
    if (rules.crypto || symbol.is_crypto()) && notional < CRYPTO_MIN_NOTIONAL {
        return Err(Refusal::BelowMinNotional { symbol: symbol.clone(), notional, min: CRYPTO_MIN_NOTIONAL });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn crypto_orders_are_gtc_and_stock_orders_day() {
        let btc = Symbol::new("BTC/USD").unwrap();
        let aapl = Symbol::new("AAPL").unwrap();
        // Without asset records (simulated broker, no risk section): the pair's name says crypto.
        assert_eq!(tif_for(&btc, None), OrderTif::Gtc);
        assert_eq!(tif_for(&aapl, None), OrderTif::Day);
        // With Alpaca's records: a crypto asset under a name without the slash is crypto too.
        let legacy = Symbol::new("BTCUSD").unwrap();
        let mut assets = HashMap::new();
        assets.insert(legacy.clone(), AssetRules { crypto: true, ..AssetRules::assumed(&legacy) });
        assets.insert(aapl.clone(), AssetRules { fractionable: true, ..AssetRules::assumed(&aapl) });
        assert_eq!(tif_for(&legacy, Some(&assets)), OrderTif::Gtc);
        assert_eq!(tif_for(&legacy, None), OrderTif::Day, "no record: the name alone decides");
        assert_eq!(tif_for(&aapl, Some(&assets)), OrderTif::Day, "fractional stock orders are day orders");
        assert_eq!(tif_for(&btc, Some(&assets)), OrderTif::Gtc);
    }

    #[test]
    fn quantities_round_down_to_the_pairs_increment() {
        let eth = Symbol::new("ETH/USD").unwrap();
        assert_eq!(order_qty(&eth, None, d("0.1234567891234")), d("0.123456789"));
        let mut assets = HashMap::new();
        let rules = AssetRules { min_trade_increment: Some(d("0.001")), ..AssetRules::assumed(&eth) };
        assets.insert(eth.clone(), rules.clone());
        assert_eq!(order_qty(&eth, Some(&assets), d("0.1239")), d("0.123"));
        assert_eq!(order_qty(&eth, Some(&assets), d("2")), d("2"));
        assert_eq!(order_qty(&eth, Some(&assets), d("0.0009")), Decimal::ZERO);
        // What the rounding gives passes the increment rule; what it would have cut is refused.
        assert_eq!(check(&eth, d("0.123"), d("3000"), &rules), Ok(()));
        let e = check(&eth, d("0.1239"), d("3000"), &rules).unwrap_err();
        assert_eq!(e.reason(), "qty_increment");
        assert!(e.to_string().contains("0.001"), "{e}");
    }

    #[test]
    fn crypto_orders_under_a_dollar_are_refused() {
        let btc = Symbol::new("BTC/USD").unwrap();
        let rules = AssetRules::assumed(&btc);
        let e = check(&btc, d("0.00001"), d("50000"), &rules).unwrap_err();
        assert_eq!(e.reason(), "below_min_notional");
        assert!(e.to_string().contains("0.50") && e.to_string().contains("1.00"), "{e}");
        assert_eq!(check(&btc, d("0.00002"), d("50000"), &rules), Ok(()));
        // Stocks have no such minimum here.
        let aapl = Symbol::new("AAPL").unwrap();
        assert_eq!(check(&aapl, d("0.001"), d("100"), &AssetRules::assumed(&aapl)), Ok(()));
    }
}
