//! The trader's book for the dashboard, from the engine's account store: closed trades (first in, first
//! out, with fees), per-symbol holdings at their entry price with unrealised and realised P&L, and each
//! symbol's recent closes (its decisions') with the bot's fills on them.

use crate::engine::DecisionRecord;
use crate::live::view::EngineView;
use crate::oms::FillRecord;
use crate::oms::trades::{ClosedTrade, round_trips};
use crate::store::{Store, TreeName, TypedTree};
use crate::web::data::{FillMark, PriceView, SymbolView};
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeMap;

/// Closed trades shown, most recent first.
const TRADES_SHOWN: usize = 50;
/// Bars of each symbol's price chart.
const PRICE_BARS: usize = 250;

#[derive(Debug, Clone, Default)]
pub(crate) struct Book {
    pub trades: Vec<ClosedTrade>,
    pub symbols: Vec<SymbolView>,
    pub prices: Vec<PriceView>,
}

/// The book of the account in `account` (nothing without one, or when its trees do not read).
pub(crate) fn book(
    account: Option<&Store>,
    decisions: Option<&TypedTree<DecisionRecord>>,
    view: &EngineView,
    fee_bps: f64,
) -> Book {
    let Some(store) = account else { return Book::default() };
    let fills: Vec<FillRecord> = match store.tree::<FillRecord>(TreeName::Fills).and_then(|t| t.scan_prefix(b"")) {
        Ok(f) => f.into_iter().map(|(_, f)| f).collect(),
        Err(e) => {
            log::debug!("dashboard: cannot read the fills: {e}");
            return Book::default();
        }
    };
    let (closed, open) = round_trips(&fills, fee_bps);
    let last: BTreeMap<String, f64> = view.closes.iter().map(|(s, c)| (s.to_string(), *c)).collect();
    let mut symbols: BTreeMap<String, SymbolView> = view
        .closes
        .iter()
        .map(|(s, c)| (s.to_string(), SymbolView { symbol: s.to_string(), last_price: *c, ..Default::default() }))
        .collect();
    for t in &closed {
        let v = symbols
            .entry(t.symbol.clone())
            .or_insert_with(|| SymbolView { symbol: t.symbol.clone(), ..Default::default() });
        v.realised += t.pnl;
        v.fees += t.fees;
        v.trades += 1;
        v.wins += usize::from(t.pnl > 0.0);
    }
    for (s, lots) in &open {
        let v =
            symbols.entry(s.to_string()).or_insert_with(|| SymbolView { symbol: s.to_string(), ..Default::default() });
        v.qty = lots.qty;
        v.avg_entry = lots.avg_entry;
        v.fees += lots.fees;
        v.last_price = last.get(s.as_str()).copied().unwrap_or(v.last_price);
        v.unrealised = (v.last_price - lots.avg_entry) * lots.qty;
    }
    let prices = decisions.map(|d| price_views(d, view, &fills)).unwrap_or_default();
    Book {
        trades: closed.into_iter().rev().take(TRADES_SHOWN).collect(),
        symbols: symbols.into_values().collect(),
        prices,
    }
}

/// Each configured symbol's closes over the last `PRICE_BARS` decisions, and its fills in that span.
fn price_views(decisions: &TypedTree<DecisionRecord>, view: &EngineView, fills: &[FillRecord]) -> Vec<PriceView> {
    let Ok(recent) = decisions.last_n(PRICE_BARS) else { return Vec::new() };
    let mut records: Vec<DecisionRecord> = recent.into_iter().map(|(_, r)| r).collect();
    records.sort_by_key(|r| r.t);
    let from = records.first().map(|r| r.t);
    view.closes
        .iter()
        .enumerate()
        .map(|(k, (s, _))| {
            let points: Vec<_> = records.iter().filter_map(|r| r.closes.get(k).map(|c| (r.t, *c))).collect();
            let marks = fills
                .iter()
                .filter(|f| &f.symbol == s && from.is_some_and(|t0| f.time >= t0))
                .map(|f| FillMark {
                    t: f.time,
                    buy: f.side == crate::domain::Side::Buy,
                    qty: f.qty.to_f64().unwrap_or(0.0),
                    price: f.price.to_f64().unwrap_or(0.0),
                    reason: crate::web::data::order_reason(f.client_order_id.as_str()),
                })
                .collect();
            PriceView {
                symbol: s.to_string(),
                t: points.iter().map(|p| p.0).collect(),
                close: points.iter().map(|p| p.1).collect(),
                fills: marks,
                ..Default::default()
            }
        })
        .collect()
}
