//! The engine's contract with its edges: `Event`s in, `Command`s out, the `EngineClock` it reads, the broker's
//! snapshot, and the `Core` trait the live runner and the simulated sessions drive. Nothing here imports
//! the engine's internals or anything above the risk checks.

use crate::domain::{Bar, ClientOrderId, OrderRequest, Symbol};
use crate::domain::{BrokerOrder, OrderUpdate};
use crate::risk::RiskApproved;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

/// Time as the engine sees it: the wall clock live, the bar clock in replay and backtest.
pub trait EngineClock: Send {
    /// The time now, as this clock tells it.
    fn now(&self) -> DateTime<Utc>;
}

/// The process's clock (`crate::clock::now`): the wall clock, or the simulated one `TRADEBOT_SIM_CLOCK`
/// installed at start.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessClock;

impl EngineClock for ProcessClock {
    fn now(&self) -> DateTime<Utc> {
        crate::clock::now()
    }
}

/// A clock that shows what it was last set to: replays, backtests and tests move it bar by bar.
#[derive(Debug, Clone)]
pub struct ManualClock(std::sync::Arc<std::sync::Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock showing `t` (shared: its clones show what any of them was set to).
    pub fn new(t: DateTime<Utc>) -> Self {
        ManualClock(std::sync::Arc::new(std::sync::Mutex::new(t)))
    }

    /// Moves the clock (and every clone of it) to `t`.
    pub fn set(&self, t: DateTime<Utc>) {
        // A poisoned lock only means another thread panicked while holding a plain timestamp; keep going.
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *g = t;
    }
}

impl EngineClock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the broker says it holds, fetched by the edge on `Command::Reconcile`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BrokerSnapshot {
    /// Open orders and orders closed since the last snapshot (or the last day), as the broker reports them.
    pub orders: Vec<BrokerOrder>,
    /// Positions by symbol (negative when short); a symbol absent here is flat.
    pub positions: Vec<(Symbol, Decimal)>,
    /// Cash in the account, in dollars.
    pub cash: Decimal,
    /// Cash plus positions at the broker's marks, in dollars.
    pub equity: Decimal,
    /// When the broker's answer was taken.
    pub taken_at: Option<DateTime<Utc>>,
}

/// Operator requests (control socket, signals, scheduler).
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// No new orders until `Resume`; open orders are left alone.
    Pause,
    /// Orders allowed again after `Pause`.
    Resume,
    /// Close every position, then pause.
    Flatten,
    /// Shutdown has begun: no new orders from here on.
    Shutdown,
}

/// Everything that can happen to the engine.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A closed bar.
    Bar(Bar),
    /// A minute bar of a symbol between two bars of a longer timeframe (live): marks the positions to
    /// market, checks the daily loss limit and the trailing stops. No features, no decision.
    Mark(Bar),
    /// The period starting at `t` closed without a bar of `symbol` while other symbols had theirs: its
    /// last close is carried, it is stale (never traded) until its next bar.
    NoBar {
        /// The symbol with no bar in the period.
        symbol: Symbol,
        /// The period's start.
        t: DateTime<Utc>,
    },
    /// A trade_updates event (or the simulated broker's equivalent): acks, fills, cancels, rejects.
    Order(Box<OrderUpdate>),
    /// The broker's view, answering `Command::Reconcile`.
    Reconciled(Box<BrokerSnapshot>),
    /// The broker's update stream dropped and came back: updates may have been missed, so no new order
    /// goes out until the next `Reconciled`.
    BrokerReconnected,
    /// The runner is about to send this order (its turn in the command queue has come): the lost rule's
    /// grace period starts now.
    Sending {
        /// The order about to be sent.
        client_order_id: ClientOrderId,
    },
    /// A submit failed before reaching the broker, or the broker refused it outright.
    SubmitFailed {
        /// The order that was not placed.
        client_order_id: ClientOrderId,
        /// The error, as the runner or the broker gave it.
        reason: String,
        /// Whether the same order may be tried again (the broker was unavailable, or the outcome is
        /// unknown); otherwise it never will be.
        retriable: bool,
    },
    /// The order was recorded but never sent: the runner stopped first (shutdown). The broker never saw it.
    NotSent {
        /// The order that stayed recorded and unsent.
        client_order_id: ClientOrderId,
    },
    /// Time passed (periodic): stale-data checks, periodic reconciliation.
    Tick,
    /// An operator's request.
    Control(Control),
    /// A change the daemon hands the engine between two events (worked out off the trading thread).
    Update(Update),
}

/// What the daemon changes in a running engine: each arrives as an event, so the trading thread never
/// reads a file or loads a model itself, and a change lands between two bars.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// A promoted model, loaded and checked: the next decision trades with it.
    Model(ModelSwap),
    /// The risk limits of a reloaded config (SIGHUP).
    Limits(Box<crate::risk::Limits>),
    /// A refreshed exchange calendar, for the trading-hours check.
    Calendar(Box<crate::calendar::Calendar>),
    /// A person cleared the tripped kill switch (`tradebot risk clear` beside the daemon): forgotten on
    /// disk and in memory, orders allowed again from the next bar.
    ClearKill {
        /// Who cleared it (the person named by `tradebot risk clear`), for the log.
        who: String,
        /// When.
        at: chrono::DateTime<chrono::Utc>,
    },
}

/// A loaded model on its way to the engine.
pub enum LoadedModel {
    /// A PPO (or SAC) policy.
    Ppo(crate::policy::PpoPolicy),
    /// An LSTM, with what a fresh probability source needs when the engine had none.
    Lstm {
        /// The classifier's session.
        policy: Box<crate::policy::LstmPolicy>,
        /// The feature set it was trained on.
        features: crate::features::FeatureSpec,
        /// Its input windows (lengths, horizon).
        window: crate::features::windows::WindowSpec,
    },
}

/// A loaded model in an event: events are `Clone`, a model (its ONNX session) is not, so the event holds
/// it once and the engine takes it (`take`); a copy of the event finds it gone.
#[derive(Clone)]
pub struct ModelSwap(std::sync::Arc<std::sync::Mutex<Option<LoadedModel>>>);

impl ModelSwap {
    /// An event's hold on `model`.
    pub fn new(model: LoadedModel) -> Self {
        ModelSwap(std::sync::Arc::new(std::sync::Mutex::new(Some(model))))
    }

    /// The model, the first time; `None` after.
    pub fn take(&self) -> Option<LoadedModel> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl std::fmt::Debug for ModelSwap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelSwap")
    }
}

impl PartialEq for ModelSwap {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Everything the engine asks its edges to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Send this order. Its transition to an in-flight state is already stored and flushed.
    Submit(RiskApproved<OrderRequest>),
    /// Cancel a working order.
    Cancel(ClientOrderId),
    /// Fetch a `BrokerSnapshot` and answer with `Event::Reconciled`.
    Reconcile,
}

/// The synchronous trading core a runner drives: the engine, or a scripted stand-in in tests.
pub trait Core: Send + 'static {
    /// Handles one event and returns what the edges must do, in order.
    fn process(&mut self, ev: Event) -> Vec<Command>;
    /// Events for this core from beside the runner (the live daemon's chores: controls, promoted models,
    /// reloaded limits): the runner takes the receiver once at start and feeds its events in with the rest.
    fn inbox(&mut self) -> Option<tokio::sync::mpsc::Receiver<Event>> {
        None
    }
}
