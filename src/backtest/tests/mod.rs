//! The backtest against the other ways of trading the same model over the same bars: the env's rollout
//! (`parity`) and the replay daemon (`replay_parity`).

mod parity;
mod replay_parity;
