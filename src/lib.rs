//! tradebot: a trading daemon for people who trade with machine-learning models on their own machine.
//!
//! A bar's route, from the feed to the broker (no step passes through `cli`):
//!
//! ```text
//!  Alpaca stream (minutes) ─► daemon::bars (stored, aggregated to market.timeframe; NoBar for a quiet symbol)
//!  Alpaca stream / replay ─► daemon::{live, replay} ─► Event::{Bar, NoBar} ─► engine::Engine::process
//!      features ─► policy (ONNX Runtime) ─► engine::strategy ─► risk::RiskChecks ─► oms::Oms
//!      ─► Command::Submit(RiskApproved<OrderRequest>) ─► live runner ─► broker::{AlpacaBroker, SimBroker}
//!  trade_updates / snapshots ─► Event::{Order, Reconciled} ─► oms (fills once, positions, reconciliation)
//!  weekend: daemon::retrainer ─► retrain::pipeline ─► `tradebot train` child (training) ─► retrain::gate
//!      (backtest::session, the one evaluator) ─► models::Registry ─► loaded beside the trading thread
//!      (daemon::chores) ─► Event::Update(Model) ─► the engine swaps between two bars
//! ```
//!
//! Modules by layer, lowest first; a module uses only modules of lower layers (`scripts/check-imports.py`,
//! run by `make lint`, fails on any upward import):
//!
//! 0. [`alloc`] (jemalloc), [`logging`] (journald or stderr), [`native`] (ONNX Runtime and libtorch
//!    discovery), [`domain`] (symbols, timeframes, bars, decimal money, order ids and lifecycle),
//!    [`calendar`] (the exchange's trading days and session times), [`clock`] (the wall clock or a
//!    simulated one shared with the fake Alpaca),
//!    [`schedule`] (the retrain schedule), [`optim`] (Adam, feature `train`), [`readback`] (counted
//!    tensor reads into host memory, feature `train`), [`autocast`] (bfloat16 autocast on CUDA, feature `train`), [`seeded`]
//!    (seeded initialisation on libtorch's global generator, feature `train`), [`out`] (every command's
//!    stdout: a closed pipe ends quietly, a failed write is an error, never a panic).
//! 1. [`store`] (sled, typed trees, one owner), [`features`] (the versioned feature set, streaming and
//!    batch), [`onnx`] (our ONNX writer and reference forwards), [`feed`] (the `MarketFeed` trait, its
//!    events and the bar `Aggregator`).
//! 2. [`env`] (the vectorized trading environment, its execution rule and C kernel), [`models`]
//!    (manifests, the content-hashed registry, promote/rollback).
//! 3. [`config`]: the TOML file parsed once into checked values.
//! 4. [`data`] (CSV import, aligned panels), [`policy`] (ONNX Runtime sessions), [`control`] (the control
//!    socket and the status report), [`alpaca`] (wire types, REST, streams, the fake Alpaca), [`alerts`]
//!    (webhooks, Telegram and Discord, from a queue).
//! 5. [`risk`] (the checks every order passes, stops, the kill switch), [`metrics`] (Prometheus), [`rl`] and [`lstm`] (training, feature `train`).
//! 6. `engine::contract`: the events, commands, clock and broker snapshot the engine and its edges share.
//! 7. [`oms`]: the order manager (idempotent submission, fills exactly once, reconciliation).
//! 8. [`broker`]: the `Broker` trait, Alpaca's and the simulated one.
//! 9. [`engine`]: `Engine::process(Event) -> Vec<Command>`, one synchronous core for live, paper, replay
//!    and backtest.
//! 10. [`live`]: the live runner (feed, broker tasks and ticks into events; the core on its own thread)
//!     and `live::drive`, its command handling and the one synchronous loop of replays, backtests and the gate.
//! 11. [`backtest`]: the one evaluator (`backtest::session`) and its metrics, the tear sheets, and the
//!     account's own history (`backtest::account`, `tradebot report`).
//! 12. [`retrain`] (the pipeline, the gate, records), 13. [`training`] (`tradebot train` jobs).
//! 14. [`web`] (`/metrics` and the dashboard), 15. [`daemon`] (`tradebot::run`: the runtime, signals,
//!     shutdown, the live and replay drivers, the host and its chores thread beside the live trading thread,
//!     the retrainer), and [`bench`] (`tradebot bench ...`), 16. [`cli`] (parses and dispatches).

pub mod alerts;
pub mod alloc;
pub mod alpaca;
#[cfg(feature = "train")]
pub mod autocast;
pub mod backtest;
pub mod bench;
pub mod broker;
pub mod calendar;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod daemon;
pub mod data;
pub mod domain;
pub mod engine;
pub mod env;
pub mod features;
pub mod feed;
pub mod fuzzing;
#[cfg(feature = "train")]
pub mod gpu;
/// The GPU tests that belong to no single module (feature `gpu-tests`: `make test-gpu`).
#[cfg(all(test, feature = "gpu-tests", feature = "train"))]
mod gpu_tests;
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
pub mod out;
pub mod policy;
#[cfg(feature = "train")]
pub mod readback;
pub mod retrain;
pub mod risk;
#[cfg(feature = "train")]
pub mod rl;
pub mod schedule;
#[cfg(feature = "train")]
pub mod seeded;
pub mod store;
pub mod telegram;
pub mod training;
pub mod tune;
pub mod web;

pub use daemon::{Outcome, RunOptions, run};
