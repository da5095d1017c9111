//! The replay buffer: a ring of transitions in tensors on the training device. A vectorized step writes
//! its E transitions with one `index_copy_` per field; a batch is drawn uniformly with one `index_select`
//! per field (the rows drawn by the trainer's own generator).

use tch::{Device, Kind, Tensor};

pub(super) struct Replay {
    obs: Tensor,
    act: Tensor,
    reward: Tensor,
    next_obs: Tensor,
    done: Tensor,
    capacity: i64,
    /// The next row to write.
    pos: i64,
    len: i64,
}

/// One batch of transitions: `obs [B, D]`, `act [B, A]`, `reward [B]`, `next_obs [B, D]`, `done [B]`.
pub(super) struct Batch {
    pub obs: Tensor,
    pub act: Tensor,
    pub reward: Tensor,
    pub next_obs: Tensor,
    pub done: Tensor,
}

impl Replay {
    pub(super) fn new(capacity: usize, obs_dim: usize, act_dim: usize, device: Device) -> Replay {
        let c = capacity as i64;
        let zeros = |shape: &[i64]| Tensor::zeros(shape, (Kind::Float, device));
        Replay {
            obs: zeros(&[c, obs_dim as i64]),
            act: zeros(&[c, act_dim as i64]),
            reward: zeros(&[c]),
            next_obs: zeros(&[c, obs_dim as i64]),
            done: zeros(&[c]),
            capacity: c,
            pos: 0,
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// Adds one vectorized step's `E` transitions (E at most the capacity), overwriting the oldest.
    pub(super) fn push(&mut self, obs: &Tensor, act: &Tensor, reward: &Tensor, next_obs: &Tensor, done: &Tensor) {
        let e = obs.size()[0];
        let device = self.obs.device();
        let idx = (Tensor::arange(e, (Kind::Int64, device)) + self.pos).remainder(self.capacity);
        tch::no_grad(|| {
            let put = |dst: &mut Tensor, src: &Tensor| {
                let _ = dst.index_copy_(
                    0,
                    &idx,
                    &src.to_device(device).to_kind(Kind::Float).reshape_as(&dst.narrow(0, 0, e)),
                );
            };
            put(&mut self.obs, obs);
            put(&mut self.act, act);
            put(&mut self.reward, reward);
            put(&mut self.next_obs, next_obs);
            put(&mut self.done, done);
        });
        self.pos = (self.pos + e) % self.capacity;
        self.len = (self.len + e).min(self.capacity);
    }

    /// The transitions at rows `idx` (each below `len`), on the device.
    pub(super) fn sample(&self, idx: &[i64]) -> Batch {
        let idx = Tensor::from_slice(idx).to_device(self.obs.device());
        let pick = |t: &Tensor| t.index_select(0, &idx);
        Batch {
            obs: pick(&self.obs),
            act: pick(&self.act),
            reward: pick(&self.reward),
            next_obs: pick(&self.next_obs),
            done: pick(&self.done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_overwrites_the_oldest_and_samples_only_what_it_holds() {
        let mut r = Replay::new(5, 2, 1, Device::Cpu);
        let step = |k: f32| {
            let obs = Tensor::from_slice(&[k, k, k + 0.5, k + 0.5]).view([2, 2]);
            let act = Tensor::from_slice(&[k, k + 0.5]).view([2, 1]);
            let rew = Tensor::from_slice(&[k, k + 0.5]);
            (obs, act, rew)
        };
        for k in [1.0f32, 2.0, 3.0] {
            let (o, a, rw) = step(k);
            r.push(&o, &a, &rw, &(&o + 100.0), &Tensor::from_slice(&[0.0f32, 1.0]));
        }
        // Six transitions into five rows: the first (reward 1.0) is gone, row 0 holds the last (3.5).
        assert_eq!(r.len(), 5);
        let rewards = Vec::<f32>::try_from(&r.reward).unwrap();
        assert_eq!(rewards, vec![3.5, 1.5, 2.0, 2.5, 3.0]);
        let next = Vec::<f32>::try_from(r.next_obs.reshape([-1])).unwrap();
        assert_eq!(&next[..2], &[103.5, 103.5]);
        assert_eq!(Vec::<f32>::try_from(&r.done).unwrap(), vec![1.0, 1.0, 0.0, 1.0, 0.0]);
        // A batch's fields belong to the same transitions.
        let mut rng = crate::env::rng::SplitMix64::new(3);
        let idx: Vec<i64> = (0..64).map(|_| rng.below(r.len()) as i64).collect();
        let b = r.sample(&idx);
        let (obs, rew) = (Vec::<f32>::try_from(b.obs.reshape([-1])).unwrap(), Vec::<f32>::try_from(&b.reward).unwrap());
        let act = Vec::<f32>::try_from(b.act.reshape([-1])).unwrap();
        for i in 0..64 {
            assert_eq!((obs[2 * i], act[i]), (rew[i], rew[i]), "row {i}");
            assert!(rew[i] >= 1.5, "a sample of an overwritten transition: {rew:?}");
        }
    }
}
