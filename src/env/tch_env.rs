//! `TchEnv`: the same environment as `VecEnv` on libtorch tensors, on the CPU or a CUDA device.
//!
//! State is held as f64 tensors (cash `[E]`; holding, entry, high-water, cooldown `[E, A]`), the panel as
//! `[T, A]` on the device. Each step runs the rule of `exec` with the same f64 operations: stops and sells
//! for all envs and assets at once, then the buys' cash cap asset by asset (each buy spends cash the next
//! one may need), with every sum over assets (cash, turnover, equity) taken in `VecEnv`'s order, so the
//! two agree bit for bit. Episode starts come from the same seeded generator. All envs start together and
//! episodes have a fixed length, so they also finish together: `done` is one flag per step.

use super::config::{Accounting, EnvConfig, EnvError};
use super::panel::Panel;
use super::rng::SplitMix64;
use crate::exec::ExecParams;
use tch::{Device, Kind, Tensor};

pub struct TchEnv {
    cfg: EnvConfig,
    device: Device,
    n_days: usize,
    n_assets: usize,
    n_features: usize,
    prices: Tensor,
    features: Tensor,
    turbulent: Option<Tensor>,
    rng: SplitMix64,
    cash: Tensor,
    holding: Tensor,
    entry: Tensor,
    high_water: Tensor,
    cooldown: Tensor,
    day: Tensor,
    steps: usize,
    equity: Tensor,
}

/// One step of all envs: `[E]` tensors on the env's device.
pub struct TchStep {
    pub reward: Tensor,
    pub equity: Tensor,
    pub done: bool,
}

impl TchEnv {
    pub fn new(cfg: EnvConfig, panel: &Panel, device: Device) -> Result<Self, EnvError> {
        if cfg.n_envs == 0 {
            return Err(EnvError::NoEnvs);
        }
        if cfg.episode_len == 0 || cfg.episode_len >= panel.n_days {
            return Err(EnvError::EpisodeTooLong { len: cfg.episode_len, days: panel.n_days });
        }
        if cfg.accounting != Accounting::Standard {
            return Err(EnvError::Unsupported("the tensor env has standard f64 accounting only"));
        }
        if cfg.action != crate::env::ActionSpace::Shares || cfg.reward != crate::env::Reward::Equity {
            return Err(EnvError::Unsupported("the tensor env runs share-count actions and the equity reward only"));
        }
        let (t, a, f) = (panel.n_days as i64, panel.n_assets as i64, panel.n_features as i64);
        let prices = Tensor::from_slice(&panel.prices).view([t, a]).to_kind(Kind::Double).to_device(device);
        let features = Tensor::from_slice(&panel.features).view([t, a * f]).to_device(device);
        let turbulent = match (&panel.turbulence, cfg.turbulence_threshold) {
            (Some(tu), Some(th)) => Some(Tensor::from_slice(tu).gt(th).to_device(device)),
            _ => None,
        };
        let e = cfg.n_envs as i64;
        let zeros = || Tensor::zeros([e], (Kind::Double, device));
        let grid = || Tensor::zeros([e, a], (Kind::Double, device));
        let mut env = TchEnv {
            rng: SplitMix64::new(cfg.seed),
            cash: zeros(),
            holding: grid(),
            entry: grid(),
            high_water: grid(),
            cooldown: grid(),
            day: Tensor::zeros([e], (Kind::Int64, device)),
            steps: 0,
            equity: zeros(),
            n_days: panel.n_days,
            n_assets: panel.n_assets,
            n_features: panel.n_features,
            prices,
            features,
            turbulent,
            device,
            cfg,
        };
        env.reset_all();
        Ok(env)
    }

    fn reset_all(&mut self) {
        let span = self.n_days - self.cfg.episode_len;
        let starts: Vec<i64> =
            (0..self.cfg.n_envs).map(|_| if self.cfg.fixed_start { 0 } else { self.rng.below(span) as i64 }).collect();
        self.day = Tensor::from_slice(&starts).to_device(self.device);
        self.steps = 0;
        let _ = self.cash.fill_(self.cfg.initial_cash);
        let _ = self.equity.fill_(self.cfg.initial_cash);
        for t in [&mut self.holding, &mut self.entry, &mut self.high_water, &mut self.cooldown] {
            let _ = t.zero_();
        }
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn cash(&self) -> &Tensor {
        &self.cash
    }

    /// Holdings as `[E, A]`.
    pub fn holdings(&self) -> &Tensor {
        &self.holding
    }

    /// Cooldown counters as `[E, A]` (f64 whole numbers).
    pub fn cooldowns(&self) -> &Tensor {
        &self.cooldown
    }

    /// Entry prices and high-water marks as `[E, A]` each.
    pub fn entries_and_high_water(&self) -> (&Tensor, &Tensor) {
        (&self.entry, &self.high_water)
    }

    /// Each env's current day, `[E]` int64.
    pub fn days(&self) -> &Tensor {
        &self.day
    }

    /// Observations `[E, 1 + A * (1 + F)]` in `VecEnv::observe`'s layout, f32.
    pub fn observe(&self) -> Tensor {
        let (a, f) = (self.n_assets as i64, self.n_features as i64);
        let prices = self.prices.index_select(0, &self.day);
        let value = (&self.holding * prices / self.cfg.initial_cash).to_kind(Kind::Float);
        let feats = self.features.index_select(0, &self.day).view([-1, a, f]);
        let per_asset = Tensor::cat(&[value.unsqueeze(2), feats], 2).view([-1, a * (1 + f)]);
        let cash = (&self.cash / self.cfg.initial_cash).to_kind(Kind::Float).unsqueeze(1);
        Tensor::cat(&[cash, per_asset], 1)
    }

    /// Steps every env with `actions` (`[E, A]`, any float kind, on any device; NaN counts as 0).
    pub fn step(&mut self, actions: &Tensor) -> Result<TchStep, EnvError> {
        let want = [self.cfg.n_envs as i64, self.n_assets as i64];
        if actions.size() != want {
            return Err(EnvError::ActionShape { got: actions.numel(), want: (want[0] * want[1]) as usize });
        }
        let actions = actions.to_device(self.device).to_kind(Kind::Float).nan_to_num(0.0, None, None);
        let actions = actions.to_kind(Kind::Double);
        self.day += 1;
        self.steps += 1;
        let prices = self.prices.index_select(0, &self.day);
        // On a turbulent day every holding is sold and nothing bought: `[E, 1]`, broadcast over assets.
        let sell_all = self.turbulent.as_ref().map(|t| t.index_select(0, &self.day).unsqueeze(1));
        let p = self.cfg.exec;
        let mut turnover = Tensor::zeros([want[0]], (Kind::Double, self.device));
        self.sell(&p, &prices, &actions, sell_all.as_ref(), &mut turnover);
        let actions = match &sell_all {
            Some(s) => actions.where_self(&s.logical_not(), &Tensor::zeros_like(&actions)),
            None => actions,
        };
        self.buy(&p, &prices, &actions, &mut turnover);
        let value = &self.holding * &prices;
        let mut equity = self.cash.copy();
        for k in 0..self.n_assets as i64 {
            equity += value.select(1, k);
        }
        let change = &equity - &self.equity;
        let reward = ((change - turnover * self.cfg.turnover_penalty) * self.cfg.reward_scale).to_kind(Kind::Float);
        self.equity = equity.copy();
        let done = self.steps == self.cfg.episode_len;
        if done {
            self.reset_all();
        }
        Ok(TchStep { reward, equity, done })
    }

    fn units(p: &ExecParams, act: &Tensor) -> Tensor {
        let q = act.clamp(-1.0, 1.0).abs() * p.max_trade;
        if p.integer_units { q.trunc() } else { q }
    }

    /// `exec::sell_phase` (or `exec::liquidate` where `sell_all`) for every env and asset at once; only the
    /// cash and turnover sums run asset by asset, in `VecEnv`'s order.
    fn sell(&mut self, p: &ExecParams, price: &Tensor, act: &Tensor, sell_all: Option<&Tensor>, turnover: &mut Tensor) {
        let cd = (&self.cooldown - 1.0).clamp_min(0.0);
        let held = &self.holding;
        let is_held = held.gt(0.0);
        let calm_held = match sell_all {
            Some(s) => is_held.logical_and(&s.logical_not()),
            None => is_held,
        };
        let hwm = self.high_water.maximum(price).where_self(&calm_held, &self.high_water);
        let stop = if p.trailing_stop > 0.0 {
            price.le_tensor(&(&hwm * (1.0 - p.trailing_stop))).logical_and(&calm_held)
        } else {
            Tensor::zeros_like(&calm_held)
        };
        let want = Self::units(p, act);
        let asked = act.lt(0.0).logical_and(&want.ge(p.min_order)).logical_and(&want.gt(0.0));
        let zero = Tensor::zeros_like(held);
        let mut qty = held.where_self(&stop, &want.minimum(held).where_self(&asked, &zero));
        if let Some(s) = sell_all {
            qty = held.where_self(s, &qty);
        }
        let traded = qty.gt(0.0);
        let notional = (price * (1.0 - p.slippage_bps * 1e-4) * &qty).where_self(&traded, &zero);
        let net = &notional - &notional * (p.fee_bps * 1e-4);
        for k in 0..self.n_assets as i64 {
            let cash = &self.cash + net.select(1, k);
            self.cash = cash.where_self(&traded.select(1, k), &self.cash);
            *turnover += notional.select(1, k);
        }
        let left = (held - &qty).where_self(&traded, held);
        let flat = left.le(0.0).logical_and(&traded);
        self.holding = zero.where_self(&flat, &left);
        self.entry = zero.where_self(&flat, &self.entry);
        self.high_water = zero.where_self(&flat, &hwm);
        self.cooldown = Tensor::full_like(&cd, f64::from(p.cooldown_bars) + 1.0).where_self(&stop, &cd);
    }

    /// `exec::buy_phase` for every env: the cash cap runs asset by asset (each buy spends what the next
    /// may use), the position updates for all assets at once.
    fn buy(&mut self, p: &ExecParams, price: &Tensor, act: &Tensor, turnover: &mut Tensor) {
        let want = Self::units(p, act);
        let asked = act
            .gt(0.0)
            .logical_and(&self.cooldown.le(0.0))
            .logical_and(&want.ge(p.min_order))
            .logical_and(&want.gt(0.0));
        let px = price * (1.0 + p.slippage_bps * 1e-4);
        let unit_cost = if p.cash_cap_ignores_fees { px.copy() } else { &px * (1.0 + p.fee_bps * 1e-4) };
        let zero_e = Tensor::zeros_like(&self.cash);
        let mut qtys = Vec::with_capacity(self.n_assets);
        for k in 0..self.n_assets as i64 {
            let mut affordable = (&self.cash / unit_cost.select(1, k)).clamp_min(0.0);
            if p.integer_units {
                affordable = affordable.floor();
            }
            let qty = want.select(1, k).minimum(&affordable).where_self(&asked.select(1, k), &zero_e);
            let traded = qty.gt(0.0);
            let notional = (px.select(1, k) * &qty).where_self(&traded, &zero_e);
            let spent = &notional + &notional * (p.fee_bps * 1e-4);
            let left = &self.cash - spent;
            let left = if p.cash_cap_ignores_fees { left } else { left.clamp_min(0.0) };
            self.cash = left.where_self(&traded, &self.cash);
            *turnover += notional;
            qtys.push(qty);
        }
        let qty = Tensor::stack(&qtys, 1);
        let traded = qty.gt(0.0);
        let held = &self.holding;
        let was_held = held.gt(0.0);
        let entry = ((&self.entry * held + &px * &qty) / (held + &qty)).where_self(&was_held, &px);
        let hwm = self.high_water.maximum(price).where_self(&was_held, price);
        self.entry = entry.where_self(&traded, &self.entry);
        self.high_water = hwm.where_self(&traded, &self.high_water);
        self.holding = (held + &qty).where_self(&traded, held);
    }
}
