//! One env of a `VecEnv`: its state borrowed from the flat arrays, its reset, and its step: the trade
//! (liquidation on a turbulent day, target weights with a no-trade band, share counts, or FinRL's own
//! accounting), then the reward.

use super::config::{Accounting, EnvConfig};
use super::finrl::{self, Kind, Np};
use super::panel::Panel;
use super::reward::{Benchmark, Reward, differential_sharpe, net_log_return};
use super::rng::SplitMix64;
use crate::exec::ActionSpace;
use crate::exec::weights::{band_orders, target_weights};
use crate::exec::{ExecParams, Position, buy_phase, buy_units_phase, liquidate, sell_phase, sell_units_phase};

/// One env's state, borrowed from `VecEnv`'s arrays.
pub(super) struct EnvMut<'a> {
    pub(super) cash: &'a mut f64,
    pub(super) cash_kind: &'a mut Kind,
    pub(super) pos: &'a mut [Position],
    pub(super) day: &'a mut usize,
    pub(super) steps: &'a mut usize,
    pub(super) equity: &'a mut f64,
    pub(super) moments: &'a mut [f64; 2],
    pub(super) draws: &'a mut u64,
}

impl EnvMut<'_> {
    pub(super) fn reset(&mut self, cfg: &EnvConfig, n_days: usize) {
        let span = (n_days - cfg.episode_len) as u64;
        *self.day = if cfg.fixed_start {
            0
        } else {
            let n = *self.draws;
            *self.draws = n.wrapping_add(cfg.n_envs as u64);
            (SplitMix64::nth(cfg.seed, n) % span.max(1)) as usize
        };
        *self.steps = 0;
        *self.cash = cfg.initial_cash;
        *self.cash_kind = Kind::Weak;
        self.pos.fill(Position::default());
        *self.equity = cfg.initial_cash;
        *self.moments = [0.0; 2];
    }

    /// One step: stops and sells for every asset, then buys; returns (reward, equity). `ws` is scratch
    /// space for the weights action space.
    pub(super) fn step(
        &mut self,
        cfg: &EnvConfig,
        panel: &Panel,
        actions: &[f32],
        scratch: &mut Vec<f32>,
        ws: &mut Vec<f64>,
    ) -> (f32, f64) {
        *self.day += 1;
        *self.steps += 1;
        let day = *self.day;
        let turbulent = match (&panel.turbulence, cfg.turbulence_threshold) {
            (Some(t), Some(th)) => t[day] > th,
            _ => false,
        };
        let (equity, turnover) = if cfg.accounting == Accounting::FinrlNumpy {
            let a = panel.n_assets;
            let prices = &panel.prices[day * a..(day + 1) * a];
            let mut np_cash = Np::new(*self.cash, *self.cash_kind);
            let total = finrl::step(&cfg.exec, self.pos, &mut np_cash, prices, actions, turbulent, scratch);
            (*self.cash, *self.cash_kind) = (np_cash.v, np_cash.kind);
            (total.v, 0.0)
        } else {
            self.trade(cfg, panel, actions, turbulent, ws)
        };
        let prev = *self.equity;
        *self.equity = equity;
        (self.reward(cfg, panel, equity, prev, turnover) as f32, equity)
    }

    /// The standard accounting's trade of one step; returns (equity, turnover) at the day's prices.
    fn trade(
        &mut self,
        cfg: &EnvConfig,
        panel: &Panel,
        actions: &[f32],
        turbulent: bool,
        ws: &mut Vec<f64>,
    ) -> (f64, f64) {
        let a = panel.n_assets;
        let day = *self.day;
        let prices = &panel.prices[day * a..(day + 1) * a];
        let p = &cfg.exec;
        let act = |k: usize| if actions[k].is_nan() { 0.0 } else { f64::from(actions[k]) };
        let mut turnover = 0.0;
        if let (false, ActionSpace::Weights { band, max_weight }) = (turbulent, cfg.action) {
            turnover = self.trade_weights(p, panel, actions, (band, max_weight), ws);
        }
        let (pos, cash) = (&mut *self.pos, &mut *self.cash);
        if turbulent {
            for k in 0..a {
                turnover += liquidate(p, &mut pos[k], cash, f64::from(prices[k])).notional;
            }
        } else if !matches!(cfg.action, ActionSpace::Weights { .. }) {
            for k in 0..a {
                turnover += sell_phase(p, &mut pos[k], cash, f64::from(prices[k]), act(k)).notional;
            }
            for k in 0..a {
                turnover += buy_phase(p, &mut pos[k], cash, f64::from(prices[k]), act(k)).notional;
            }
        }
        let mut equity = *cash;
        for k in 0..a {
            equity += pos[k].holding * f64::from(prices[k]);
        }
        (equity, turnover)
    }

    /// The step's reward from the equity before (`prev`) and after it.
    fn reward(&mut self, cfg: &EnvConfig, panel: &Panel, equity: f64, prev: f64, turnover: f64) -> f64 {
        let day = *self.day;
        let size = cfg.reward_scale * cfg.initial_cash;
        match &cfg.reward {
            Reward::Equity => cfg.reward_scale * (equity - prev - cfg.turnover_penalty * turnover),
            Reward::VsBenchmark { benchmark, turnover_bps } => {
                let start = day - *self.steps;
                let bench =
                    (benchmark_value(panel, benchmark, start, day), benchmark_value(panel, benchmark, start, day - 1));
                size * net_log_return(equity, prev, Some(bench), turnover, *turnover_bps)
            }
            Reward::DifferentialSharpe { eta, turnover_bps } => {
                let r = net_log_return(equity, prev, None, turnover, *turnover_bps);
                let [ma, mb] = &mut *self.moments;
                differential_sharpe(r, *eta, ma, mb)
            }
        }
    }

    /// The weights action space's trade: sized at the observation day's prices (all the engine knows when it
    /// decides), executed at this day's. `ws` is scratch: [target | holdings | sizing prices | prices | units],
    /// each `a` long. Returns the turnover.
    fn trade_weights(
        &mut self,
        p: &ExecParams,
        panel: &Panel,
        actions: &[f32],
        (band, max_weight): (f64, f64),
        ws: &mut Vec<f64>,
    ) -> f64 {
        let a = panel.n_assets;
        let day = *self.day;
        let (pos, cash) = (&mut *self.pos, &mut *self.cash);
        let prices = &panel.prices[day * a..(day + 1) * a];
        let seen = &panel.prices[(day - 1) * a..day * a];
        ws.clear();
        ws.resize(5 * a, 0.0);
        let (target, rest) = ws.split_at_mut(a);
        let (held, rest) = rest.split_at_mut(a);
        let (seen_px, rest) = rest.split_at_mut(a);
        let (px, units) = rest.split_at_mut(a);
        target_weights(actions, max_weight, target);
        let mut equity = *cash;
        for k in 0..a {
            (held[k], seen_px[k], px[k]) = (pos[k].holding, f64::from(seen[k]), f64::from(prices[k]));
            equity += held[k] * seen_px[k];
        }
        band_orders(target, held, seen_px, equity, band, p, units);
        let mut turnover = 0.0;
        for k in 0..a {
            turnover += sell_units_phase(p, &mut pos[k], cash, px[k], (-units[k]).max(0.0)).notional;
        }
        for k in 0..a {
            turnover += buy_units_phase(p, &mut pos[k], cash, px[k], units[k].max(0.0)).notional;
        }
        turnover
    }
}

/// The benchmark's value at `day` for an episode that started at `start` (1 at the start): equal-weight
/// buy-and-hold of the panel's assets, or the index series (checked present by `VecEnv::new`).
pub(crate) fn benchmark_value(panel: &Panel, benchmark: &Benchmark, start: usize, day: usize) -> f64 {
    match (benchmark, &panel.benchmark) {
        (Benchmark::Symbol(_), Some(b)) => f64::from(b[day]) / f64::from(b[start]),
        _ => {
            let a = panel.n_assets;
            let sum: f64 = (0..a).map(|k| f64::from(panel.price(day, k)) / f64::from(panel.price(start, k))).sum();
            sum / a as f64
        }
    }
}
