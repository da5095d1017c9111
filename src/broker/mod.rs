//! Brokers. `sim`: the local simulated broker, which fills orders with the very execution rule the
//! training environment uses (`env::exec`). The Alpaca brokers and the `Broker` trait that the engine
//! talks to land with the trading engine.

pub mod sim;

pub use sim::{SimBroker, SimError, SimFill, SimOrder};
