//! tradebot: a trading daemon for people who trade with machine-learning models on their own machine.
//!
//! How data flows (modules in brackets; the ones marked * land in later versions):
//!
//! ```text
//!  CSV / Alpaca REST ─► [data] import ─► [store] sled trees (bars, orders, fills, ...)
//!  Alpaca WS* / replay ─► MarketFeed* ─► Engine::process(Event) -> Vec<Command>*
//!                                           features* ─► policy (ort)* ─► risk* ─► OMS* ─► broker*
//! ```
//!
//! - [`backtest`]: the engine over stored bars with the SimBroker; metrics against buy-and-hold.
//! - [`broker`]: the simulated broker, filling orders with the environment's execution rule.
//! - [`domain`]: symbols, timeframes, bars, decimal money, order ids, the order lifecycle table.
//! - [`config`]: the TOML file parsed once into checked values; `Secret` for API keys.
//! - [`store`]: sled, typed trees, time-ordered keys, the durability rule, one owner at a time.
//! - [`data`]: CSV import with split adjustment and line-numbered bad rows.
//! - [`models`]: model manifests and the registry (content-hash ids, verified loads, promote/rollback).
//! - [`features`]: the versioned feature set, one bar in, one row out; the batch path runs the same state.
//! - [`env`]: the vectorized trading environment (E envs x A assets) and the one execution rule.
//! - [`live`]: the live runner: feed, broker updates and ticks into events, the core on its own thread,
//!   commands to the broker, one owner of shutdown.
//! - [`risk`]: the checks every order passes (`RiskChecks` → `RiskApproved`), trailing stops and cooldown,
//!   the daily loss limit and its kill switch, persisted until `tradebot risk clear`.
//! - [`oms`]: the order manager: idempotent submission, fills exactly once, positions, reconciliation.
//! - [`native`]: ONNX Runtime and libtorch discovery and loading.
//! - [`policy`]: ONNX Runtime sessions for the PPO and LSTM models, checked against the pipeline at load.
//! - [`onnx`]: our ONNX writer (PPO policy MLP, LSTM classifier) with plain-Rust reference forwards.
//! - [`rl`] (feature `train`): the `VecEnv` trait, vectorized CartPole, PPO with tch.
//! - [`lstm`] (feature `train`): the LSTM direction classifier: device-resident dataset, training, metrics.
//! - [`replay`]: stored bars through the `MarketFeed` trait, as fast as possible or at N× real time.
//! - [`logging`]: journald when under systemd, readable stderr otherwise.
//! - [`alpaca`]: Alpaca wire types, parsing, REST client, streams and a fake Alpaca server for tests.
//! - [`metrics`]: Prometheus metrics shared by the feed, engine and retrainer.
//! - [`web`]: `/metrics` and the dashboard (server-rendered HTML and SVG, token required).
//! - [`cli`]: the commands of the `tradebot` binary.

pub mod alloc;
pub mod alpaca;
pub mod backtest;
pub mod broker;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod data;
pub mod domain;
pub mod engine;
pub mod env;
pub mod features;
pub mod live;
pub mod logging;
#[cfg(feature = "train")]
pub mod lstm;
pub mod metrics;
pub mod models;
pub mod native;
pub mod oms;
pub mod onnx;
#[cfg(feature = "train")]
pub mod optim;
pub mod policy;
pub mod replay;
pub mod retrain;
pub mod risk;
#[cfg(feature = "train")]
pub mod rl;
pub mod schedule;
pub mod store;
pub mod training;
pub mod web;

pub use daemon::{Outcome, RunOptions, run};
