//! tradebot: a trading daemon for people who trade with machine-learning models on their own machine.
//!
//! A bar's route, from the feed to the broker (no step passes through `cli`):
//!
//! ```text
//!  Alpaca stream (minutes) ─► feed::LiveBars (stored, aggregated to market.timeframe; NoBar for a quiet symbol)
//!      ─► live runner (live::engine_core::LiveCore on the trading thread) ─► Event::{Bar, NoBar}
//!  replay: stored bars ─► engine::drive::run (daemon::replay_driver drives it) ─► Event::Bar
//!      ─► engine::Engine::process
//!      features ─► policy (ONNX Runtime) ─► engine::strategy ─► risk::RiskChecks ─► oms::Oms
//!      ─► Command::Submit(RiskApproved<OrderRequest>) ─► live runner ─► broker::{AlpacaBroker, SimBroker}
//!  trade_updates / snapshots ─► Event::{Order, Reconciled} ─► oms (fills once, positions, reconciliation)
//!  weekend: daemon::retrainer ─► retrain::pipeline ─► `tradebot train` child (training) ─► retrain::gate
//!      (backtest::session, the one evaluator) ─► models::Registry ─► loaded beside the trading thread
//!      (daemon::chores) ─► Event::Update(Model) ─► the engine swaps between two bars
//! ```
//!
//! The public surface is what the binary, `tests/` and `fuzz/` use: the modules `alpaca`, `bench`, `cli`,
//! `control`, `domain`, `engine`, `env`, `models`, `oms`, `retrain`, `rl`, `store` (and `fuzzing` with
//! feature `testkit`), and the few items of the private ones re-exported at the end of this file.
//!
//! Modules by layer, lowest first, numbered as `LAYERS` in `scripts/check-imports.py`; a module uses only
//! modules of lower layers (the script, run by `make lint`, fails on any upward import):
//!
//! 0. [`alloc`] (jemalloc), [`logging`] (journald or stderr), [`runtime_libs`] (ONNX Runtime and libtorch
//!    discovery), [`domain`] (symbols, timeframes, bars, decimal money, order ids and lifecycle),
//!    [`calendar`] (the exchange's trading days and session times), [`clock`] (the wall clock or a
//!    simulated one shared with the fake Alpaca),
//!    [`schedule`] (the retrain schedule), [`exec`] (the execution rule: positions, the fill rule, fees and
//!    slippage, stops, and the action spaces' order sizing, target weights in a no-trade band; the training
//!    env, the simulated broker, risk and the engine apply the same one),
//!    [`ml`] (the trainers' helpers, feature `train`: autocast, NVML and CUDA, Adam, counted read-backs,
//!    seeding), [`out`] (every command's stdout: a closed pipe ends quietly, a failed write is an error,
//!    never a panic).
//! 1. [`store`] (sled, typed trees, one owner), [`features`] (the versioned feature set, streaming and
//!    batch), [`onnx`] (our ONNX writer and reference forwards).
//! 2. [`env`] (the vectorized trading environment and its C kernel), [`models`]
//!    (manifests, the content-hashed registry, promote/rollback), [`feed`] (the `MarketFeed` trait, its
//!    events, the bar `Aggregator`, and `LiveBars`: every minute stored, aggregated to the timeframe).
//! 3. [`config`]: the TOML file parsed once into checked values.
//! 4. [`data`] (CSV import, aligned panels), [`policy`] (ONNX Runtime sessions), [`control`] (the control
//!    socket and the status report), [`alpaca`] (wire types, REST, streams, the fake Alpaca), [`alerts`]
//!    (webhooks, Telegram and Discord, from a queue).
//! 5. `fuzzing` (the fuzz targets' entry points, feature `testkit` or the crate's own tests).
//! 6. [`risk`] (the checks every order passes, stops, the kill switch), [`metrics`] (Prometheus), [`rl`] and
//!    [`lstm`] (training, feature `train`).
//! 7. [`contract`]: the events, commands, clock and broker snapshot the engine and its edges share.
//! 8. [`oms`]: the order manager (idempotent submission, fills exactly once, reconciliation).
//! 9. [`broker`]: the `Broker` trait, Alpaca's and the simulated one.
//! 10. [`engine`]: `Engine::process(Event) -> Vec<Command>`, one synchronous core for live, paper, replay
//!     and backtest, and `engine::drive`, its command handling and the one synchronous loop of replays,
//!     backtests and the gate.
//! 11. [`live`]: the live runner (feed, broker tasks and ticks into events; the core on its own thread,
//!     handling them with `engine::drive::handle`: `engine_core::LiveCore`, which reports through
//!     `report::Reporter`, metrics and systemd, and leaves a `view::TradingView` for the daemon's chores).
//! 12. [`backtest`]: the one evaluator (`backtest::session`) and its metrics, the tear sheets, and the
//!     account's own history (`backtest::account`, `tradebot report`).
//! 13. [`retrain`] (the pipeline, the gate, records), 14. [`training`] (`tradebot train` jobs), 15. [`tune`]
//!     (the hyper-parameter search: `tradebot tune`, a retrain's `retrain.tune`).
//! 16. [`web`] (`/metrics` and the dashboard), 17. [`telegram`] (the bot: `/status` and the like answered
//!     from the dashboard's data, `/pause` and the like sent to the daemon on the control channel).
//! 18. [`daemon`] (`tradebot::run`: the runtime, signals, shutdown, the live and replay drivers, the host and
//!     its chores thread beside the live trading thread, the retrainer), and [`bench`]
//!     (`tradebot bench ...`), 19. [`cli`] (parses and dispatches).
//!
//! Tests follow one pattern. A module's unit tests are its `tests` module: inline, or `tests.rs` in the
//! module's folder (`cli/tests.rs`; `daemon/chores/tests.rs` for `daemon/chores.rs`); tests on several
//! topics make it a folder, `tests/mod.rs` declaring one file per topic (`engine/tests/money.rs`). Only
//! `gpu_tests` keeps its own name: it is the filter `make test-gpu` runs. `scripts/check-sizes.py` fails
//! on a `*_tests.rs` file. Integration tests are Cargo's: `tests/<topic>.rs`, `tests/risk/main.rs`, and
//! the helpers they share in `tests/common/`.

// Every public item is documented (`missing_docs`).
#![warn(missing_docs)]

mod alerts;
mod alloc;
pub mod alpaca;
mod backtest;
pub mod bench;
mod broker;
mod calendar;
pub mod cli;
mod clock;
mod config;
mod contract;
pub mod control;
mod daemon;
mod data;
pub mod domain;
pub mod engine;
pub mod env;
mod exec;
mod features;
mod feed;
/// The fuzz targets' entry points: feature `testkit` (`fuzz/` enables it) or the crate's own tests.
#[cfg(any(test, feature = "testkit"))]
pub mod fuzzing;
/// The GPU tests that belong to no single module (feature `gpu-tests`: `make test-gpu`).
#[cfg(all(test, feature = "gpu-tests", feature = "train"))]
mod gpu_tests;
mod live;
mod logging;
#[cfg(feature = "train")]
mod lstm;
mod metrics;
#[cfg(feature = "train")]
mod ml;
pub mod models;
pub mod oms;
mod onnx;
mod out;
mod policy;
pub mod retrain;
mod risk;
#[cfg(feature = "train")]
pub mod rl;
mod runtime_libs;
mod schedule;
pub mod store;
mod telegram;
mod training;
mod tune;
mod web;

pub use daemon::{RunEnd, RunOptions, run};

// What the binary (`main`) and the integration tests (`tests/`) use of the crate's private modules.
pub use alloc::keep_freed_pages;
pub use calendar::{Calendar, REGULAR_CLOSE};
pub use clock::{ENV as CLOCK_ENV, SimClock};
pub use config::{Config, ConfigError, EX_CONFIG, KillSwitchAction, LstmConfig};
pub use daemon::status::offline::keep_published;
pub use daemon::{EX_CANTCREAT, StateDirError};
pub use exec::{ActionSpace, ExecParams};
pub use features::windows::context_names;
pub use features::{FEATURE_VERSION, FeatureSpec};
pub use live::{EX_FATAL, EX_PANIC, RunError};
pub use onnx::mlp::{MlpPolicy, Squash};
pub use onnx::{Activation, Dense};
pub use out::{EX_IOERR, OutError, err_fmt, error_lines};
pub use policy::{Pipeline, PpoPolicy};
pub use risk::DailyLoss;
pub use runtime_libs::{init_onnxruntime, pyenv_python};
#[cfg(feature = "train")]
pub use training::device::cuda_unusable;
