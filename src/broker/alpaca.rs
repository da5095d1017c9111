//! `AlpacaBroker`: the `Broker` trait over Alpaca's trading REST API (`alpaca::rest::RestClient`).
//!
//! - `submit`: checks the asset (tradable, fractionable when the quantity is fractional, at least its
//!   `min_order_size`, whole steps of its `min_trade_increment`; looked up once per symbol) and sends a
//!   market order with the order's time in force (`gtc` for crypto, `day` for stocks) and our client_order_id
//!   through `RestClient::submit_order`, which never sends an order twice (after an ambiguous failure it
//!   looks the order up by client_order_id first).
//! - `cancel`: finds the order by client_order_id and cancels it by Alpaca's id.
//! - `snapshot`: every open order and every order of the last `lookback` (open or closed, read page by
//!   page, no cap), the positions and the account: what the OMS reconciles against. Lists are read
//!   element by element: an order or position tradebot cannot read as its own (an options order, a
//!   multi-leg order with no symbol, ...) is logged once and left alone, never failing the snapshot.
//!   Crypto positions, which Alpaca names `BTCUSD`, come back under the pair's symbol `BTC/USD` (the one
//!   orders, fills and the config use), mapped through the crypto asset list.
//!
//! REST errors map onto `BrokerError` by what they mean for the order: refused, outcome unknown,
//! unavailable for now, or keys refused.

use super::{Broker, BrokerError};
use crate::alpaca::event::BrokerOrder;
use crate::alpaca::model::{Asset, BrokerPosition};
use crate::alpaca::rest::{
    CancelOrder, GetAccount, GetAsset, GetOrderByClientId, ListAssets, ListOrders, ListOrdersQuery, ListPositions,
    NewOrder, OrderFilter, OrderKind, RestClient, RestError, Skipped, TimeInForce,
};
use crate::contract::BrokerSnapshot;
use crate::domain::{ClientOrderId, OrderId, OrderRequest, OrderTif, Symbol};
use crate::risk::{AssetRules, RiskApproved};
use chrono::Utc;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, HashMap, HashSet};

pub(crate) struct AlpacaBroker {
    rest: RestClient,
    /// Closed orders younger than this are part of every snapshot.
    lookback: chrono::Duration,
    /// Orders per list page (Alpaca's maximum is 500); every page is read.
    page: u32,
    assets: HashMap<Symbol, Asset>,
    /// Alpaca's position symbol of each crypto pair (`BTCUSD` → `BTC/USD`), from the crypto asset list.
    crypto_pairs: HashMap<String, Symbol>,
    /// List elements already reported as unreadable (each is logged once, not on every snapshot).
    reported: HashSet<Skipped>,
}

impl AlpacaBroker {
    pub(crate) fn new(rest: RestClient) -> Self {
        AlpacaBroker {
            rest,
            lookback: chrono::Duration::days(7),
            page: 500,
            assets: HashMap::new(),
            crypto_pairs: HashMap::new(),
            reported: HashSet::new(),
        }
    }

    async fn asset(&mut self, symbol: &Symbol) -> Result<Asset, BrokerError> {
        if let Some(a) = self.assets.get(symbol) {
            return Ok(a.clone());
        }
        let a = self.rest.issue::<GetAsset>(symbol).await.map_err(|e| map_error(e, false))?;
        self.assets.insert(symbol.clone(), a.clone());
        Ok(a)
    }

    /// Every order of the filter submitted after `after`, page by page (oldest first, each page starting
    /// just before the last one's newest order; duplicates dropped), so no cap leaves an order out.
    async fn list(
        &mut self,
        status: OrderFilter,
        after: Option<chrono::DateTime<Utc>>,
    ) -> Result<Vec<BrokerOrder>, BrokerError> {
        let mut out: Vec<BrokerOrder> = Vec::new();
        let mut seen = HashSet::new();
        let mut after = after;
        loop {
            let q = ListOrdersQuery { status, limit: self.page, after, symbols: Vec::new(), oldest_first: true };
            let page = self.rest.issue::<ListOrders>(&q).await.map_err(|e| map_error(e, false))?;
            self.report(&page.skipped, "order");
            let n = page.items.len() + page.skipped.len();
            let newest = page.items.iter().filter_map(|o| o.created_at).max();
            let before = out.len();
            for o in page.items {
                if seen.insert(o.id.clone()) {
                    out.push(o);
                }
            }
            let full = n >= self.page as usize;
            match newest {
                // Alpaca's `after` is exclusive: step back a microsecond so orders sharing the boundary
                // instant are read again (and dropped as duplicates) rather than missed.
                Some(t) if full && out.len() > before => after = Some(t - chrono::Duration::microseconds(1)),
                _ => return Ok(out),
            }
        }
    }

    /// The orders of the lookback window and every open order.
    async fn orders_since(&mut self, taken_at: chrono::DateTime<Utc>) -> Result<Vec<BrokerOrder>, BrokerError> {
        let mut orders = self.list(OrderFilter::All, Some(taken_at - self.lookback)).await?;
        let ids: HashSet<_> = orders.iter().map(|o| o.id.clone()).collect();
        for o in self.list(OrderFilter::Open, None).await? {
            if !ids.contains(&o.id) {
                orders.push(o);
            }
        }
        Ok(orders)
    }

    /// Logs each unreadable list element once.
    fn report(&mut self, skipped: &[Skipped], what: &str) {
        for s in skipped {
            if self.reported.insert(s.clone()) {
                log::warn!(
                    "broker: left alone an Alpaca {what} tradebot cannot read as its own ({}: {}); it does not \
                     count in reconciliation",
                    s.key,
                    s.reason
                );
            }
        }
    }

    /// Our symbol for a position: crypto positions come back as `BTCUSD`, mapped to the pair (`BTC/USD`)
    /// through the crypto asset list (read once, again when a position names a pair it does not hold).
    async fn position_symbol(&mut self, p: &BrokerPosition) -> Result<Symbol, BrokerError> {
        if p.class != "crypto" || p.symbol.is_crypto() {
            return Ok(p.symbol.clone());
        }
        if !self.crypto_pairs.contains_key(p.symbol.as_str()) {
            let class = "crypto".to_string();
            let assets = self.rest.issue::<ListAssets>(&class).await.map_err(|e| map_error(e, false))?;
            self.crypto_pairs = assets.into_iter().map(|a| (a.symbol.as_str().replace('/', ""), a.symbol)).collect();
        }
        Ok(match self.crypto_pairs.get(p.symbol.as_str()) {
            Some(s) => s.clone(),
            None => {
                log::warn!("broker: crypto position {} matches no crypto asset at Alpaca; keeping its name", p.symbol);
                p.symbol.clone()
            }
        })
    }
}

/// Why an order may not go to Alpaca as asked, from the asset's facts; `None` when it may.
pub(crate) fn asset_refusal(asset: &Asset, qty: Decimal) -> Option<String> {
    if !asset.tradable {
        return Some(format!("{} is not tradable at Alpaca", asset.symbol));
    }
    if qty.fract() != Decimal::ZERO && !asset.fractionable {
        return Some(format!("{} is not fractionable: quantity {qty} must be whole", asset.symbol));
    }
    if let Some(min) = asset.min_order_size
        && qty < min
    {
        return Some(format!("quantity {qty} is below {}'s minimum order size {min}", asset.symbol));
    }
    match asset.min_trade_increment {
        Some(step) if step > Decimal::ZERO && !(qty % step).is_zero() => {
            Some(format!("quantity {qty} is not a whole number of {}'s quantity increment {step}", asset.symbol))
        }
        _ => None,
    }
}

/// Alpaca's time in force for ours (chosen per asset class by `risk::tif_for`).
pub(crate) fn time_in_force(tif: OrderTif) -> TimeInForce {
    match tif {
        OrderTif::Day => TimeInForce::Day,
        OrderTif::Gtc => TimeInForce::Gtc,
        OrderTif::Ioc => TimeInForce::Ioc,
    }
}

/// A REST error in the broker's terms. `submitting`: the call was an order POST, whose outcome is
/// unknown after a server error, a timeout or an unreadable reply.
pub(crate) fn map_error(e: RestError, submitting: bool) -> BrokerError {
    let msg = e.to_string();
    match e {
        RestError::Auth { .. } => BrokerError::Auth(msg),
        RestError::Forbidden { .. }
        | RestError::InsufficientBuyingPower { .. }
        | RestError::NotFound { .. }
        | RestError::DuplicateClientOrderId { .. }
        | RestError::Unprocessable { .. }
        | RestError::Request { .. } => BrokerError::Rejected(msg),
        RestError::Server { .. } | RestError::Timeout { .. } | RestError::Transport { .. } => {
            if submitting {
                BrokerError::Ambiguous(msg)
            } else {
                BrokerError::Unavailable(msg)
            }
        }
        RestError::Decode { .. } | RestError::Unexpected { .. } if submitting => BrokerError::Ambiguous(msg),
        RestError::RateLimited { .. } | RestError::Decode { .. } | RestError::Unexpected { .. } => {
            BrokerError::Unavailable(msg)
        }
    }
}

impl Broker for AlpacaBroker {
    /// Not cancellation-safe: dropped mid-way, the order's fate is unknown until a reconciliation.
    async fn submit(&mut self, order: RiskApproved<OrderRequest>) -> Result<BrokerOrder, BrokerError> {
        let asset = self.asset(&order.symbol).await?;
        if let Some(why) = asset_refusal(&asset, order.qty.get()) {
            return Err(BrokerError::Rejected(why));
        }
        let new = NewOrder {
            symbol: order.symbol.clone(),
            side: order.side,
            qty: order.qty,
            kind: OrderKind::Market,
            time_in_force: time_in_force(order.tif),
            client_order_id: order.client_order_id.clone(),
        };
        self.rest.submit_order(&new).await.map_err(|e| map_error(e, true))
    }

    /// Cancellation-safe: a cancel may be repeated.
    async fn cancel(&mut self, id: &ClientOrderId) -> Result<(), BrokerError> {
        let o = self.rest.issue::<GetOrderByClientId>(id).await.map_err(|e| map_error(e, false))?;
        self.rest.issue::<CancelOrder>(&o.id).await.map_err(|e| map_error(e, false))
    }

    /// Cancellation-safe: read-only.
    async fn snapshot(&mut self) -> Result<BrokerSnapshot, BrokerError> {
        let taken_at = crate::clock::now();
        // Orders, positions and cash are separate calls: a fill between them would be counted in the
        // positions but not in the orders (and again when its update arrives). The orders are listed again
        // after the account; a snapshot is used only when no filled quantity moved in between.
        let mut attempt = 0;
        loop {
            let orders = self.orders_since(taken_at).await?;
            let listed = self.rest.issue::<ListPositions>(&()).await.map_err(|e| map_error(e, false))?;
            self.report(&listed.skipped, "position");
            let mut positions = Vec::with_capacity(listed.items.len());
            for p in &listed.items {
                positions.push((self.position_symbol(p).await?, p.qty));
            }
            let account = self.rest.issue::<GetAccount>(&()).await.map_err(|e| map_error(e, false))?;
            let again = self.orders_since(taken_at).await?;
            let filled = |v: &[BrokerOrder]| -> BTreeMap<OrderId, Decimal> {
                v.iter().map(|o| (o.id.clone(), o.filled_qty)).collect()
            };
            attempt += 1;
            if filled(&orders) == filled(&again) || attempt >= 3 {
                if attempt >= 3 && filled(&orders) != filled(&again) {
                    log::warn!("broker: orders kept filling while the snapshot was taken (3 tries); using the last");
                }
                return Ok(BrokerSnapshot {
                    orders: again,
                    positions,
                    cash: account.cash,
                    equity: account.equity,
                    taken_at: Some(taken_at),
                });
            }
            log::info!("broker: an order filled while the snapshot was taken; taking it again");
        }
    }
}

/// The risk checks' rules for each of `symbols`, from Alpaca's asset records; a symbol whose record cannot
/// be read is left out (the checks then assume it tradable, whole units, no minimum) and said so.
pub(crate) async fn asset_rules(rest: &RestClient, symbols: &[Symbol]) -> HashMap<Symbol, AssetRules> {
    let mut rules = HashMap::new();
    for s in symbols {
        match rest.issue::<GetAsset>(s).await {
            Ok(a) => {
                rules.insert(s.clone(), rules_of(&a));
            }
            Err(e) => log::warn!("risk: no asset record for {s} ({e}); assuming tradable, whole units, no minimum"),
        }
    }
    rules
}

/// The risk checks' rules for a symbol, from Alpaca's asset record.
fn rules_of(a: &Asset) -> AssetRules {
    AssetRules {
        tradable: a.tradable,
        fractionable: a.fractionable,
        min_order_size: a.min_order_size,
        min_trade_increment: a.min_trade_increment,
        price_increment: a.price_increment,
        crypto: a.class == "crypto" || a.symbol.is_crypto(),
    }
}

#[cfg(test)]
mod tests;
