//! The actor-critic: two MLPs (policy mean, value) with orthogonal initialisation, and a
//! state-independent log standard deviation. Variables are named under `pi/` and `vf/`, so checkpoint
//! keys are stable.

use super::PpoConfig;
use crate::onnx::{Activation, Dense};
use tch::{Kind, Tensor, nn, nn::Module};

/// PPO's actor-critic: an MLP for the policy mean (`pi/`), one for the value (`vf/`), and a state-independent log
/// standard deviation.
pub struct ActorCritic {
    actor: Vec<nn::Linear>,
    actor_head: nn::Linear,
    critic: Vec<nn::Linear>,
    critic_head: nn::Linear,
    /// `[act_dim]`: the log standard deviation of the actions, whatever the state (kept within
    /// `ppo.log_std_min`..`log_std_max`).
    pub log_std: Tensor,
    activation: Activation,
    log_std_bounds: (f64, f64),
}

fn linear(p: nn::Path, i: i64, o: i64, gain: f64) -> nn::Linear {
    let cfg =
        nn::LinearConfig { ws_init: nn::Init::Orthogonal { gain }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::linear(p, i, o, cfg)
}

fn tower(p: &nn::Path, obs_dim: i64, hidden: &[i64]) -> (Vec<nn::Linear>, i64) {
    let mut layers = Vec::new();
    let mut d = obs_dim;
    for (i, &h) in hidden.iter().enumerate() {
        layers.push(linear(p / format!("l{i}"), d, h, 2f64.sqrt()));
        d = h;
    }
    (layers, d)
}

impl ActorCritic {
    /// The networks under `vs` (`pi/`, `vf/`, `log_std`), orthogonally initialised, sized by `cfg.hidden`.
    pub fn new(vs: &nn::Path, obs_dim: usize, act_dim: usize, cfg: &PpoConfig) -> Self {
        let (actor, da) = tower(&(vs / "pi"), obs_dim as i64, &cfg.hidden);
        let (critic, dc) = tower(&(vs / "vf"), obs_dim as i64, &cfg.hidden);
        ActorCritic {
            actor,
            actor_head: linear(vs / "pi" / "mean", da, act_dim as i64, 0.01),
            critic,
            critic_head: linear(vs / "vf" / "value", dc, 1, 1.0),
            log_std: vs.var("log_std", &[act_dim as i64], nn::Init::Const(cfg.log_std_init)),
            activation: cfg.activation,
            log_std_bounds: (cfg.log_std_min, cfg.log_std_max),
        }
    }

    fn act(&self, x: Tensor) -> Tensor {
        match self.activation {
            Activation::Tanh => x.tanh(),
            Activation::Relu => x.relu(),
        }
    }

    /// Mean action `[N, act_dim]` from normalised observations.
    pub fn mean(&self, obs: &Tensor) -> Tensor {
        let mut x = obs.shallow_clone();
        for l in &self.actor {
            x = self.act(l.forward(&x));
        }
        self.actor_head.forward(&x)
    }

    /// State value `[N]`.
    pub fn value(&self, obs: &Tensor) -> Tensor {
        let mut x = obs.shallow_clone();
        for l in &self.critic {
            x = self.act(l.forward(&x));
        }
        self.critic_head.forward(&x).squeeze_dim(-1)
    }

    /// The log standard deviation within its configured bounds.
    pub fn log_std(&self) -> Tensor {
        self.log_std.clamp(self.log_std_bounds.0, self.log_std_bounds.1)
    }

    /// Log-probability `[N]` of `actions` under N(mean, exp(log_std)).
    pub fn log_prob(&self, mean: &Tensor, actions: &Tensor) -> Tensor {
        let log_std = self.log_std();
        let z = (actions - mean) / log_std.exp();
        (z.square() * -0.5 - &log_std - 0.5 * (2.0 * std::f64::consts::PI).ln()).sum_dim_intlist(-1, false, Kind::Float)
    }

    /// Entropy of the Gaussian (the same for every state).
    pub fn entropy(&self) -> Tensor {
        (self.log_std() + 0.5 * (2.0 * std::f64::consts::PI * std::f64::consts::E).ln()).sum(Kind::Float)
    }

    /// The policy's layers as plain weights, for the ONNX writer.
    pub fn policy_layers(&self) -> Result<(Vec<Dense>, Dense), tch::TchError> {
        let dense = |l: &nn::Linear| -> Result<Dense, tch::TchError> {
            let w = l.ws.to_device(tch::Device::Cpu).to_kind(Kind::Float).contiguous();
            let size = w.size();
            let bias = match &l.bs {
                Some(b) => Vec::<f32>::try_from(b.to_device(tch::Device::Cpu).to_kind(Kind::Float).contiguous())?,
                None => vec![0.0; size[0] as usize],
            };
            Ok(Dense {
                in_dim: size[1] as usize,
                out_dim: size[0] as usize,
                weight: Vec::<f32>::try_from(w.reshape([-1]))?,
                bias,
            })
        };
        let hidden = self.actor.iter().map(dense).collect::<Result<Vec<_>, _>>()?;
        Ok((hidden, dense(&self.actor_head)?))
    }

    /// Every trainable tensor in a fixed order: each actor layer's weight and bias, the actor head's, each
    /// critic layer's, the critic head's, then the log-std. The native trainer's flat parameter vector and
    /// the checkpointed Adam moments use this order.
    pub fn parameters(&self) -> Vec<Tensor> {
        let mut out = Vec::new();
        for l in self.actor.iter().chain([&self.actor_head]).chain(&self.critic).chain([&self.critic_head]) {
            out.push(l.ws.shallow_clone());
            if let Some(b) = &l.bs {
                out.push(b.shallow_clone());
            }
        }
        out.push(self.log_std.shallow_clone());
        out
    }

    /// The hidden layers' activation (`ppo.activation`).
    pub fn activation(&self) -> Activation {
        self.activation
    }
}
