//! `TchEnv`: the same environment as `VecEnv` on libtorch tensors, on the CPU or a CUDA device.
//!
//! State is held per asset as `[E]` f64 tensors (cash, holding, entry, high-water, cooldown), the panel as
//! `[T, A]` on the device. Each step runs the rule of `exec` with the same f64 operations in the same order
//! (sells asset by asset, then buys asset by asset, each over all envs at once), so it agrees with
//! `VecEnv` bit for bit; episode starts come from the same seeded generator. All envs start together and
//! episodes have a fixed length, so they also finish together: `done` is one flag per step.

use super::exec::ExecParams;
use super::panel::Panel;
use super::rng::SplitMix64;
use super::vec_env::{Accounting, EnvConfig, EnvError};
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
    holding: Vec<Tensor>,
    entry: Vec<Tensor>,
    high_water: Vec<Tensor>,
    cooldown: Vec<Tensor>,
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
        let (t, a, f) = (panel.n_days as i64, panel.n_assets as i64, panel.n_features as i64);
        let prices = Tensor::from_slice(&panel.prices).view([t, a]).to_kind(Kind::Double).to_device(device);
        let features = Tensor::from_slice(&panel.features).view([t, a * f]).to_device(device);
        let turbulent = match (&panel.turbulence, cfg.turbulence_threshold) {
            (Some(tu), Some(th)) => Some(Tensor::from_slice(tu).gt(th).to_device(device)),
            _ => None,
        };
        let e = cfg.n_envs as i64;
        let zeros = || Tensor::zeros([e], (Kind::Double, device));
        let mut env = TchEnv {
            rng: SplitMix64::new(cfg.seed),
            cash: zeros(),
            holding: (0..a).map(|_| zeros()).collect(),
            entry: (0..a).map(|_| zeros()).collect(),
            high_water: (0..a).map(|_| zeros()).collect(),
            cooldown: (0..a).map(|_| zeros()).collect(),
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
        for k in 0..self.n_assets {
            for t in [&mut self.holding[k], &mut self.entry[k], &mut self.high_water[k], &mut self.cooldown[k]] {
                let _ = t.zero_();
            }
        }
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn cash(&self) -> &Tensor {
        &self.cash
    }

    /// Holdings as `[E, A]`.
    pub fn holdings(&self) -> Tensor {
        Tensor::stack(&self.holding, 1)
    }

    /// Cooldown counters as `[E, A]` (f64 whole numbers).
    pub fn cooldowns(&self) -> Tensor {
        Tensor::stack(&self.cooldown, 1)
    }

    /// Entry prices and high-water marks as `[E, A]` each.
    pub fn entries_and_high_water(&self) -> (Tensor, Tensor) {
        (Tensor::stack(&self.entry, 1), Tensor::stack(&self.high_water, 1))
    }

    /// Each env's current day, `[E]` int64.
    pub fn days(&self) -> &Tensor {
        &self.day
    }

    /// Observations `[E, 1 + A * (1 + F)]` in `VecEnv::observe`'s layout, f32.
    pub fn observe(&self) -> Tensor {
        let (a, f) = (self.n_assets as i64, self.n_features as i64);
        let prices = self.prices.index_select(0, &self.day);
        let value = (self.holdings() * prices / self.cfg.initial_cash).to_kind(Kind::Float);
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
        let calm = self.turbulent.as_ref().map(|t| t.index_select(0, &self.day).logical_not());
        let p = self.cfg.exec;
        let mut turnover = Tensor::zeros([want[0]], (Kind::Double, self.device));
        for k in 0..self.n_assets {
            let (price, act) = (prices.select(1, k as i64), actions.select(1, k as i64));
            // On a turbulent day every holding is sold, whatever the action: a full sell, stops off.
            let act = match &calm {
                Some(c) => act.where_self(c, &Tensor::full_like(&act, -1.0)),
                None => act,
            };
            let sell_all = calm.as_ref().map(|c| c.logical_not());
            turnover += self.sell(k, &p, &price, &act, sell_all.as_ref());
        }
        for k in 0..self.n_assets {
            let (price, act) = (prices.select(1, k as i64), actions.select(1, k as i64));
            let act = match &calm {
                Some(c) => act.where_self(c, &Tensor::zeros_like(&act)),
                None => act,
            };
            turnover += self.buy(k, &p, &price, &act);
        }
        let mut equity = self.cash.copy();
        for k in 0..self.n_assets {
            equity += &self.holding[k] * prices.select(1, k as i64);
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

    /// `exec::sell_phase` over all envs for asset `k` (or `exec::liquidate` where `sell_all`).
    fn sell(&mut self, k: usize, p: &ExecParams, price: &Tensor, act: &Tensor, sell_all: Option<&Tensor>) -> Tensor {
        let cd = (&self.cooldown[k] - 1.0).clamp_min(0.0);
        let held = self.holding[k].copy();
        let is_held = held.gt(0.0);
        let hwm_up = self.high_water[k].maximum(price);
        let mut hwm = hwm_up.where_self(&is_held, &self.high_water[k]);
        if let Some(s) = sell_all {
            hwm = hwm.where_self(&s.logical_not(), &self.high_water[k]);
        }
        let stop = if p.trailing_stop > 0.0 {
            let hit = price.le_tensor(&(&hwm * (1.0 - p.trailing_stop))).logical_and(&is_held);
            match sell_all {
                Some(s) => hit.logical_and(&s.logical_not()),
                None => hit,
            }
        } else {
            Tensor::zeros_like(&is_held)
        };
        let want = Self::units(p, act);
        let asked = act.lt(0.0).logical_and(&want.ge(p.min_order)).logical_and(&want.gt(0.0));
        let mut qty = want.minimum(&held).where_self(&asked, &Tensor::zeros_like(&held));
        qty = held.where_self(&stop, &qty);
        if let Some(s) = sell_all {
            qty = held.where_self(s, &qty);
        }
        let traded = qty.gt(0.0);
        let px = price * (1.0 - p.slippage_bps * 1e-4);
        let notional = (&px * &qty).where_self(&traded, &Tensor::zeros_like(&qty));
        let fee = &notional * (p.fee_bps * 1e-4);
        let cash = &self.cash + (&notional - &fee);
        self.cash = cash.where_self(&traded, &self.cash);
        let left = (&held - &qty).where_self(&traded, &held);
        let flat = left.le(0.0).logical_and(&traded);
        let zero = Tensor::zeros_like(&held);
        self.holding[k] = zero.where_self(&flat, &left);
        self.entry[k] = zero.where_self(&flat, &self.entry[k]);
        self.high_water[k] = zero.where_self(&flat, &hwm);
        self.cooldown[k] = Tensor::full_like(&cd, f64::from(p.cooldown_bars) + 1.0).where_self(&stop, &cd);
        notional
    }

    /// `exec::buy_phase` over all envs for asset `k`.
    fn buy(&mut self, k: usize, p: &ExecParams, price: &Tensor, act: &Tensor) -> Tensor {
        let want = Self::units(p, act);
        let asked = act
            .gt(0.0)
            .logical_and(&self.cooldown[k].le(0.0))
            .logical_and(&want.ge(p.min_order))
            .logical_and(&want.gt(0.0));
        let px = price * (1.0 + p.slippage_bps * 1e-4);
        let unit_cost = if p.cash_cap_ignores_fees { px.copy() } else { &px * (1.0 + p.fee_bps * 1e-4) };
        let mut affordable = (&self.cash / &unit_cost).clamp_min(0.0);
        if p.integer_units {
            affordable = affordable.floor();
        }
        let zero = Tensor::zeros_like(&want);
        let qty = want.minimum(&affordable).where_self(&asked, &zero);
        let traded = qty.gt(0.0);
        let notional = (&px * &qty).where_self(&traded, &zero);
        let fee = &notional * (p.fee_bps * 1e-4);
        let spent = &notional + &fee;
        let left = &self.cash - &spent;
        let left = if p.cash_cap_ignores_fees { left } else { left.clamp_min(0.0) };
        self.cash = left.where_self(&traded, &self.cash);
        let held = &self.holding[k];
        let was_held = held.gt(0.0);
        let avg = (&self.entry[k] * held + &px * &qty) / (held + &qty);
        let entry = avg.where_self(&was_held, &px);
        let hwm = self.high_water[k].maximum(price).where_self(&was_held, price);
        self.entry[k] = entry.where_self(&traded, &self.entry[k]);
        self.high_water[k] = hwm.where_self(&traded, &self.high_water[k]);
        self.holding[k] = (held + &qty).where_self(&traded, held);
        notional
    }
}
