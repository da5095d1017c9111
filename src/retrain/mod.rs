//! Retraining: the pieces the daemon's weekend run is made of. `child`: the training process (the same
//! binary, `tradebot train ...`) with its time and GPU-memory budgets; `gate`: the promotion decision from
//! candidate and champion backtests on the holdout.

pub mod child;
pub mod gate;
