//! Domain types shared by every layer: symbols, timeframes, bars, decimal money, order ids and the order
//! lifecycle. Nothing here knows about serde wire formats of any broker; `alpaca::parse` converts into
//! these types once.

mod bar;
mod ids;
mod money;
pub mod number;
mod order;
mod request;
mod symbol;
mod timeframe;
mod update;

pub use bar::{Bar, BarError};
pub use ids::{ClientOrderId, IdError, OrderId};
pub use money::{MoneyError, Price, Qty};
pub use number::{count, duration_words, figure, money, money_dec};
pub use order::{OrderEvent, OrderStatus, TransitionError};
pub use request::{OrderRequest, OrderTif, OrderWhy};
pub use symbol::{SpellingError, Symbol, SymbolError, symbol_list};
pub use timeframe::{Timeframe, TimeframeError};
pub use update::{BrokerOrder, Fill, OrderUpdate, UpdateKind};

use serde::{Deserialize, Serialize};

/// Direction of an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Buys: opens or adds to a long position, or covers a short one.
    Buy,
    /// Sells: reduces or closes a long position, or opens a short one.
    Sell,
}

impl Side {
    /// The side as Alpaca spells it on the wire and in logs: `"buy"` or `"sell"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "buy",
            Side::Sell => "sell",
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
