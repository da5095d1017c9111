//! The fake server's brokerage: one account with cash, positions, prices and every order ever placed.
//! Market orders (and marketable limit orders) fill at once at the symbol's current price. A new order
//! passes Alpaca's order rules first (`rules`: time in force per asset class, crypto steps and minimums,
//! wash-trade prevention).

pub(super) use super::rules::Refusal;
use super::rules::{self, refusal};
use crate::alpaca::wire::rest as w;
use chrono::{DateTime, SecondsFormat, Utc};
use rust_decimal::Decimal;
use std::collections::{BTreeMap, HashSet};
use std::str::FromStr;

/// The fake's brokerage account: cash, positions, last prices and every order, kept as Alpaca's wire types
/// so the REST handlers and trade_updates serve them as they are.
#[derive(Debug, Default)]
pub struct Book {
    /// Cash in dollars: debited by buys, credited by sells (no fees).
    pub cash: Decimal,
    /// symbol → (qty, average entry price).
    pub positions: BTreeMap<String, (Decimal, Decimal)>,
    /// symbol → last price in dollars, used to fill market orders and to value positions (set by tests or by
    /// each published bar's close).
    pub prices: BTreeMap<String, Decimal>,
    /// Every order accepted, in submission order, as `GET /v2/orders` returns them.
    pub orders: Vec<w::Order>,
    /// Every refused order request: (client_order_id as sent, the refusal's message), for assertions
    /// such as "no client_order_id was ever sent twice".
    pub refused: Vec<(Option<String>, String)>,
    /// Leave every new order open (as with the market closed) instead of filling marketable ones.
    pub hold_orders: bool,
    /// Cancels as Alpaca does them: `pending_cancel` at once, `canceled` this long after (the order may
    /// still execute meanwhile, and a new order against it is a wash trade). `None`: canceled at once.
    pub cancel_delay: Option<std::time::Duration>,
    /// The fake's clock when it runs a simulated market (`fake::market`): order times are stamped with it.
    pub clock: Option<crate::clock::SimClock>,
    client_ids: HashSet<String>,
    next_id: u64,
}

impl Book {
    /// Now on the fake's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.map_or_else(Utc::now, |c| c.at(Utc::now()))
    }

    fn stamp(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Nanos, true)
    }

    /// An empty account holding `cash` dollars, filling orders at once.
    pub fn new(cash: Decimal) -> Self {
        Book { cash, ..Book::default() }
    }

    /// Accepts, and fills where it can, an order; returns it as Alpaca would, or the refusal (recorded).
    pub fn submit(&mut self, req: &w::OrderRequest) -> Result<w::Order, Refusal> {
        let out = self.try_submit(req);
        if let Err((_, body)) = &out {
            self.refused.push((req.client_order_id.clone(), body.message.clone()));
        }
        out
    }

    fn try_submit(&mut self, req: &w::OrderRequest) -> Result<w::Order, Refusal> {
        let coid = req.client_order_id.clone().unwrap_or_else(|| format!("auto-{}", self.next_id));
        if coid.len() > 48 {
            return Err(refusal(422, 40010000, "client_order_id must be no more than 48 characters"));
        }
        if self.client_ids.contains(&coid) {
            return Err(refusal(422, 40010001, "client_order_id must be unique"));
        }
        let qty = req.qty.as_deref().and_then(|q| Decimal::from_str(q).ok()).filter(|q| *q > Decimal::ZERO);
        rules::order_form(req, qty)?;
        let Some(qty) = qty else { return Err(refusal(422, 42210000, "invalid qty")) };
        let Some(&price) = self.prices.get(&req.symbol) else {
            return Err(refusal(422, 42210000, &format!("asset {} not found", req.symbol)));
        };
        let limit = req.limit_price.as_deref().and_then(|p| Decimal::from_str(p).ok());
        let marketable = match (req.kind, limit) {
            (w::OrderType::Market, _) => true,
            (w::OrderType::Limit, Some(lp)) => {
                (req.side == w::Side::Buy && lp >= price) || (req.side == w::Side::Sell && lp <= price)
            }
            _ => return Err(refusal(422, 42210000, "invalid order type")),
        };
        let limit = limit.filter(|_| req.kind == w::OrderType::Limit);
        rules::wash_trade(req, limit, &self.orders)?;
        let held = self.positions.get(&req.symbol).map_or(Decimal::ZERO, |p| p.0);
        if rules::is_crypto(&req.symbol) {
            rules::crypto_funds(req, qty, limit.unwrap_or(price), held, &self.orders)?;
        }
        match req.side {
            w::Side::Buy if qty * price > self.cash => return Err(refusal(403, 40310000, "insufficient buying power")),
            w::Side::Sell if qty > held => return Err(refusal(403, 40310000, "insufficient qty available for order")),
            w::Side::Unknown => return Err(refusal(422, 42210000, "invalid side")),
            _ => {}
        }
        self.next_id += 1;
        self.client_ids.insert(coid.clone());
        let mut o = w::Order {
            id: format!("00000000-0000-4000-8000-{:012}", self.next_id),
            client_order_id: coid,
            created_at: Some(self.stamp()),
            submitted_at: Some(self.stamp()),
            symbol: req.symbol.clone(),
            asset_class: Some(if req.symbol.contains('/') { "crypto" } else { "us_equity" }.into()),
            qty: Some(qty.to_string()),
            filled_qty: Some("0".into()),
            order_class: Some(String::new()),
            kind: req.kind,
            side: req.side,
            time_in_force: req.time_in_force,
            limit_price: req.limit_price.clone(),
            status: w::OrderStatus::New,
            ..w::Order::default()
        };
        if marketable && !self.hold_orders {
            self.fill(&mut o, qty, price);
        }
        self.orders.push(o.clone());
        Ok(o)
    }

    fn fill(&mut self, o: &mut w::Order, qty: Decimal, price: Decimal) {
        let pos = self.positions.entry(o.symbol.clone()).or_insert((Decimal::ZERO, Decimal::ZERO));
        if o.side == w::Side::Buy {
            self.cash -= qty * price;
            let total = pos.0 + qty;
            pos.1 = (pos.0 * pos.1 + qty * price) / total;
            pos.0 = total;
        } else {
            self.cash += qty * price;
            pos.0 -= qty;
        }
        if pos.0.is_zero() {
            self.positions.remove(&o.symbol);
        }
        o.status = w::OrderStatus::Filled;
        o.filled_qty = Some(qty.to_string());
        o.filled_avg_price = Some(price.to_string());
        o.filled_at = Some(self.stamp());
        o.updated_at = Some(self.stamp());
    }

    /// Fills every open order at its symbol's price (orders held with `hold_orders` filling now, as at the
    /// market's open). Returns how many filled.
    pub fn fill_held(&mut self) -> usize {
        let mut orders = std::mem::take(&mut self.orders);
        let mut n = 0;
        for o in orders.iter_mut().filter(|o| o.status == w::OrderStatus::New) {
            let qty = o.qty.as_deref().and_then(|q| q.parse::<Decimal>().ok());
            if let (Some(qty), Some(&price)) = (qty, self.prices.get(&o.symbol)) {
                self.fill(o, qty, price);
                n += 1;
            }
        }
        self.orders = orders;
        n
    }

    /// Fills the open orders of `symbol` that are marketable at `price` (a bar's open) at that price; returns
    /// them as filled.
    pub fn fill_held_of(&mut self, symbol: &str, price: Decimal) -> Vec<w::Order> {
        let mut orders = std::mem::take(&mut self.orders);
        let mut filled = Vec::new();
        for o in orders.iter_mut().filter(|o| o.status == w::OrderStatus::New && o.symbol == symbol) {
            let limit = o.limit_price.as_deref().and_then(|p| Decimal::from_str(p).ok());
            let marketable = match (o.kind, limit) {
                (w::OrderType::Limit, Some(lp)) => {
                    (o.side == w::Side::Buy && lp >= price) || (o.side == w::Side::Sell && lp <= price)
                }
                _ => true,
            };
            if let (true, Some(qty)) = (marketable, o.qty.as_deref().and_then(|q| q.parse::<Decimal>().ok())) {
                self.fill(o, qty, price);
                filled.push(o.clone());
            }
        }
        self.orders = orders;
        filled
    }

    /// The order with Alpaca id `id` (with or without its UUID dashes), as `GET /v2/orders/{id}` finds it.
    pub fn find(&self, id: &str) -> Option<&w::Order> {
        let bare = |s: &str| s.replace('-', "");
        self.orders.iter().find(|o| o.id == id || bare(&o.id) == bare(id))
    }

    /// The order sent with this client_order_id, as `GET /v2/orders:by_client_order_id` finds it.
    pub fn find_by_client_id(&self, coid: &str) -> Option<&w::Order> {
        self.orders.iter().find(|o| o.client_order_id == coid)
    }

    /// Cancels an open order: `Err` 404 when unknown, 422 when no longer cancelable.
    pub fn cancel(&mut self, id: &str) -> Result<w::Order, Refusal> {
        let Some(idx) = self.find(id).and_then(|f| self.orders.iter().position(|o| o.id == f.id)) else {
            return Err(refusal(404, 40410000, "order not found"));
        };
        let stamp = self.stamp();
        let delayed = self.cancel_delay.is_some();
        let o = &mut self.orders[idx];
        let cancelable =
            matches!(o.status, w::OrderStatus::New | w::OrderStatus::Accepted | w::OrderStatus::PartiallyFilled);
        let pending = o.status == w::OrderStatus::PendingCancel;
        if !(cancelable || (pending && !delayed)) {
            return Err(refusal(422, 42210000, "order is not cancelable"));
        }
        if delayed {
            o.status = w::OrderStatus::PendingCancel;
        } else {
            o.status = w::OrderStatus::Canceled;
            o.canceled_at = Some(stamp);
        }
        Ok(o.clone())
    }

    /// The end of a delayed cancel (`cancel_delay`): `pending_cancel` becomes `canceled`.
    pub fn finish_cancel(&mut self, id: &str) -> Option<w::Order> {
        let stamp = self.stamp();
        let o = self.orders.iter_mut().find(|o| o.id == id && o.status == w::OrderStatus::PendingCancel)?;
        o.status = w::OrderStatus::Canceled;
        o.canceled_at = Some(stamp);
        Some(o.clone())
    }

    /// The position in `symbol` as `GET /v2/positions/{symbol}` reports it (crypto without the slash, valued at the
    /// last price); `None` when none is held.
    pub fn position(&self, symbol: &str) -> Option<w::Position> {
        let &(qty, avg) = self.positions.get(symbol)?;
        let price = self.prices.get(symbol).copied().unwrap_or(avg);
        // Alpaca names crypto positions without the pair's slash (`BTCUSD`), while its orders, fills
        // and assets say `BTC/USD`.
        let crypto = symbol.contains('/');
        Some(w::Position {
            asset_id: format!("asset-{symbol}"),
            symbol: symbol.replace('/', ""),
            exchange: if crypto { "CRYPTO" } else { "NASDAQ" }.into(),
            asset_class: if crypto { "crypto" } else { "us_equity" }.into(),
            avg_entry_price: avg.to_string(),
            qty: qty.to_string(),
            qty_available: Some(qty.to_string()),
            side: if qty >= Decimal::ZERO { "long" } else { "short" }.into(),
            market_value: Some((qty * price).to_string()),
            cost_basis: Some((qty * avg).to_string()),
            current_price: Some(price.to_string()),
            ..w::Position::default()
        })
    }

    /// Cash plus the positions valued at their last prices (at entry price when none), in dollars.
    pub fn equity(&self) -> Decimal {
        self.cash
            + self
                .positions
                .iter()
                .map(|(s, (q, avg))| *q * self.prices.get(s).copied().unwrap_or(*avg))
                .sum::<Decimal>()
    }

    /// The account as `GET /v2/account` reports it: active, unblocked, buying power equal to cash.
    pub fn account(&self) -> w::Account {
        w::Account {
            id: "fake-account".into(),
            account_number: Some("PAFAKE0001".into()),
            status: "ACTIVE".into(),
            currency: Some("USD".into()),
            cash: self.cash.to_string(),
            buying_power: self.cash.to_string(),
            equity: self.equity().to_string(),
            portfolio_value: Some(self.equity().to_string()),
            multiplier: Some("1".into()),
            trading_blocked: Some(false),
            account_blocked: Some(false),
            trade_suspended_by_user: Some(false),
            ..w::Account::default()
        }
    }
}
