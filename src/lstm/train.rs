//! The training loop: shuffled minibatches gathered on the device, class-weighted cross-entropy, AdamW;
//! after each epoch the validation loss, accuracy, macro-F1 and MCC; the best weights (by validation
//! MCC) are kept in memory and on disk, and training stops after `patience` epochs without improvement.
//! Checkpoints (`last.safetensors`, `best.safetensors`, `state.json`) allow a resume; they carry AdamW's
//! moments and step count (`crate::ml::optim`), so a resumed run continues the optimizer too.

use super::LstmConfig;
use super::dataset::WindowDataset;
use super::metrics::Confusion;
use super::model::{LstmNet, NetDims};
use std::path::Path;
use std::time::Instant;
use tch::{Device, Kind, Tensor, nn};

#[derive(Debug, thiserror::Error)]
pub(crate) enum LstmError {
    #[error("invalid LSTM configuration: {0}")]
    Config(crate::config::Invalid),
    #[error("the training split is empty")]
    EmptyTrain,
    #[error("training diverged: the loss is not finite at epoch {0}")]
    Diverged(usize),
    #[error("checkpoint {path}: {reason}")]
    Checkpoint { path: String, reason: String },
    #[error("training a minibatch in {threads} part(s), one thread each: {reason}")]
    Parts { threads: usize, reason: String },
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct EpochStats {
    pub epoch: usize,
    pub train_loss: f64,
    pub val_loss: f64,
    pub val_accuracy: f64,
    pub val_macro_f1: f64,
    pub val_mcc: f64,
    pub epoch_secs: f64,
    pub samples_per_sec: f64,
    pub best_epoch: usize,
    pub best_mcc: f64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct State {
    epoch: usize,
    best_epoch: usize,
    best_mcc: f64,
    dims: NetDims,
    config: LstmConfig,
}

/// The best epoch, its validation MCC and a copy of its weights.
type Best = (usize, f64, Vec<(String, Tensor)>);

pub(crate) struct LstmTrainer {
    pub cfg: LstmConfig,
    pub vs: nn::VarStore,
    pub net: LstmNet,
    /// AdamW (libtorch's formula), its state in the `VarStore`.
    opt: crate::ml::optim::Adam,
    pub epoch: usize,
    best: Option<Best>,
}

fn snapshot(vs: &nn::VarStore) -> Vec<(String, Tensor)> {
    tch::no_grad(|| vs.variables().into_iter().map(|(k, t)| (k, t.detach().copy())).collect())
}

impl LstmTrainer {
    pub(crate) fn new(cfg: LstmConfig, dims: NetDims, device: Device) -> Result<Self, LstmError> {
        cfg.validate().map_err(LstmError::Config)?;
        let vs = nn::VarStore::new(device);
        let net = crate::ml::seeded::seeded(cfg.seed, || LstmNet::new(&vs.root(), dims, &cfg));
        let opt = crate::ml::optim::Adam::new(
            &vs.root(),
            vs.trainable_variables(),
            crate::ml::optim::TORCH_EPS,
            cfg.weight_decay,
        );
        Ok(LstmTrainer { cfg, vs, net, opt, epoch: 0, best: None })
    }

    fn amp(&self) -> bool {
        self.cfg.mixed_precision && self.vs.device().is_cuda()
    }

    fn class_weights(&self, ds: &WindowDataset, train: &Tensor) -> Option<Tensor> {
        if !self.cfg.class_weighted {
            return None;
        }
        let labels = ds.labels.index_select(0, train);
        let counts = labels.bincount::<Tensor>(None, 3).to_kind(Kind::Float).clamp_min(1.0);
        let n = labels.size()[0] as f64;
        Some((counts.reciprocal() * (n / 3.0)).to_device(ds.device()))
    }

    /// Mean loss and confusion matrix over `idx`, in batches, without gradients. The indices go to the
    /// device once; the loss sum and the confusion counts accumulate there and are read once.
    pub(crate) fn evaluate(
        &self,
        ds: &WindowDataset,
        idx: &[i64],
        weights: Option<&Tensor>,
    ) -> Result<(f64, Confusion), LstmError> {
        let mut conf = Confusion::new(3);
        if idx.is_empty() {
            return Ok((0.0, conf));
        }
        let device = ds.device();
        let all = Tensor::from_slice(idx).to_device(device);
        let bs = self.cfg.batch_size.max(1);
        let mut loss_sum = Tensor::zeros([1], (Kind::Double, device));
        let mut counts = Tensor::zeros([9], (Kind::Double, device));
        tch::no_grad(|| {
            for start in (0..idx.len()).step_by(bs) {
                let len = bs.min(idx.len() - start);
                let b = ds.batch(&all.narrow(0, start as i64, len as i64));
                let logits =
                    tch::autocast(self.amp(), || self.net.forward(&b.fast, &b.slow, &b.context)).to_kind(Kind::Float);
                let loss = logits.cross_entropy_loss(&b.labels, weights, tch::Reduction::Mean, -100, 0.0);
                loss_sum += loss.to_kind(Kind::Double) * len as f64;
                let cell = &b.labels * 3 + logits.argmax(-1, false);
                counts += cell.bincount::<Tensor>(None, 9).to_kind(Kind::Double);
            }
        });
        let read = crate::ml::readback::f64s(&Tensor::cat(&[loss_sum, counts], 0))?;
        if let [loss, cells @ ..] = &read[..] {
            for (k, n) in cells.iter().enumerate().take(9) {
                conf.m[k / 3][k % 3] += *n as u64;
            }
            return Ok((loss / idx.len() as f64, conf));
        }
        Ok((f64::NAN, conf))
    }

    /// The class probabilities [P(down), P(flat), P(up)] of each sample of `idx`, without gradients: the
    /// indices go to the device once, the probabilities come back in one read.
    pub(crate) fn probs(&self, ds: &WindowDataset, idx: &[i64]) -> Result<Vec<[f32; 3]>, LstmError> {
        if idx.is_empty() {
            return Ok(Vec::new());
        }
        let all = Tensor::from_slice(idx).to_device(ds.device());
        let bs = self.cfg.batch_size.max(1);
        let parts = tch::no_grad(|| {
            (0..idx.len())
                .step_by(bs)
                .map(|start| {
                    let b = ds.batch(&all.narrow(0, start as i64, bs.min(idx.len() - start) as i64));
                    tch::autocast(self.amp(), || self.net.probs(&b.fast, &b.slow, &b.context)).to_kind(Kind::Float)
                })
                .collect::<Vec<_>>()
        });
        let flat = crate::ml::readback::f32s(&Tensor::cat(&parts, 0))?;
        Ok(flat.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    }

    /// One AdamW step on the minibatch `idx` (in `parts` on their threads when given); returns its loss,
    /// detached.
    fn train_batch(
        &mut self,
        ds: &WindowDataset,
        idx: &Tensor,
        weights: Option<&Tensor>,
        parts: Option<&super::parts::Parts>,
    ) -> Result<Tensor, LstmError> {
        if let Some(parts) = parts {
            let (loss, grads) =
                parts.step(idx).map_err(|reason| LstmError::Parts { threads: parts.count(), reason })?;
            self.opt.step_grads(self.cfg.learning_rate, &grads);
            return Ok(loss);
        }
        let b = ds.batch(idx);
        let logits = tch::autocast(self.amp(), || self.net.forward(&b.fast, &b.slow, &b.context)).to_kind(Kind::Float);
        let loss = logits.cross_entropy_loss(&b.labels, weights, tch::Reduction::Mean, -100, 0.0);
        self.opt.zero_grad();
        loss.backward();
        self.opt.step(self.cfg.learning_rate);
        Ok(loss.detach())
    }

    /// Trains until `max_epochs`, early stopping, or `on_epoch` returning false; then restores the best
    /// weights. Returns the statistics of every epoch run.
    pub(crate) fn fit(
        &mut self,
        ds: &WindowDataset,
        train: &[i64],
        valid: &[i64],
        checkpoint_dir: Option<&Path>,
        mut on_epoch: impl FnMut(&EpochStats) -> bool,
    ) -> Result<Vec<EpochStats>, LstmError> {
        if train.is_empty() {
            return Err(LstmError::EmptyTrain);
        }
        let device = ds.device();
        if self.amp() {
            crate::ml::autocast::bfloat16_on_this_thread();
        }
        let train_t = Tensor::from_slice(train).to_device(device);
        let weights = self.class_weights(ds, &train_t);
        // On the CPU each minibatch's gradient in parts, one thread each (one part with one thread), the
        // LSTM layers native.
        let n = super::parts::count(device);
        let parts = if device == Device::Cpu && !self.amp() {
            let p = super::parts::Parts::new(n, &self.net, ds, weights.as_ref(), self.opt.params());
            Some(p.map_err(|e| LstmError::Parts { threads: n, reason: e.to_string() })?)
        } else {
            None
        };
        let mut history = Vec::new();
        while self.epoch < self.cfg.max_epochs {
            let started = Instant::now();
            self.epoch += 1;
            let perm = train_t.index_select(0, &Tensor::randperm(train.len() as i64, (Kind::Int64, device)));
            // Summed on the device, read once an epoch: no host synchronisation per batch.
            let (mut loss_sum, mut seen) = (Tensor::zeros([] as [i64; 0], (Kind::Double, device)), 0usize);
            for start in (0..train.len()).step_by(self.cfg.batch_size) {
                let len = self.cfg.batch_size.min(train.len() - start);
                let idx = perm.narrow(0, start as i64, len as i64);
                let loss = self.train_batch(ds, &idx, weights.as_ref(), parts.as_ref())?;
                loss_sum += loss.to_kind(Kind::Double) * len as f64;
                seen += len;
            }
            let train_loss = crate::ml::readback::scalar(&loss_sum)? / seen.max(1) as f64;
            if !train_loss.is_finite() {
                return Err(LstmError::Diverged(self.epoch));
            }
            let (val_loss, conf) = self.evaluate(ds, valid, weights.as_ref())?;
            let mcc = conf.mcc();
            if self.best.as_ref().is_none_or(|(_, m, _)| mcc > *m) {
                self.best = Some((self.epoch, mcc, snapshot(&self.vs)));
            }
            let (best_epoch, best_mcc) = self.best.as_ref().map(|(e, m, _)| (*e, *m)).unwrap_or((0, 0.0));
            let secs = started.elapsed().as_secs_f64();
            let stats = EpochStats {
                epoch: self.epoch,
                train_loss,
                val_loss,
                val_accuracy: conf.accuracy(),
                val_macro_f1: conf.macro_f1(),
                val_mcc: mcc,
                epoch_secs: secs,
                samples_per_sec: seen as f64 / secs.max(1e-9),
                best_epoch,
                best_mcc,
            };
            if let Some(dir) = checkpoint_dir {
                let improved = best_epoch == self.epoch;
                if improved || self.epoch.is_multiple_of(self.cfg.checkpoint_every) {
                    self.save_checkpoint(dir, improved)?;
                }
            }
            let go_on = on_epoch(&stats);
            history.push(stats);
            if !go_on || self.epoch - best_epoch >= self.cfg.patience {
                break;
            }
        }
        self.restore_best()?;
        Ok(history)
    }

    /// Puts the best weights seen so far back into the model.
    pub(crate) fn restore_best(&mut self) -> Result<(), LstmError> {
        let Some((_, _, weights)) = &self.best else { return Ok(()) };
        let vars = self.vs.variables();
        tch::no_grad(|| {
            for (k, w) in weights {
                if let Some(v) = vars.get(k) {
                    v.shallow_clone().f_copy_(w)?;
                }
            }
            Ok::<(), tch::TchError>(())
        })?;
        Ok(self.opt.load_steps()?)
    }

    /// AdamW steps taken (restored by `resume`).
    #[cfg(test)]
    pub(crate) fn optimizer_steps(&self) -> u64 {
        self.opt.steps
    }

    pub(crate) fn best(&self) -> Option<(usize, f64)> {
        self.best.as_ref().map(|(e, m, _)| (*e, *m))
    }

    fn ck_err(path: &Path, e: impl std::fmt::Display) -> LstmError {
        LstmError::Checkpoint { path: path.display().to_string(), reason: e.to_string() }
    }

    /// Writes `last.safetensors` and `state.json`, and `best.safetensors` when `improved`.
    pub(crate) fn save_checkpoint(&self, dir: &Path, improved: bool) -> Result<(), LstmError> {
        std::fs::create_dir_all(dir).map_err(|e| Self::ck_err(dir, e))?;
        self.vs.save(dir.join("last.safetensors"))?;
        if improved {
            self.vs.save(dir.join("best.safetensors"))?;
        }
        let (best_epoch, best_mcc) = self.best().unwrap_or((0, 0.0));
        let state = State { epoch: self.epoch, best_epoch, best_mcc, dims: self.net.dims, config: self.cfg.clone() };
        let p = dir.join("state.json");
        let text = serde_json::to_string_pretty(&state).map_err(|e| Self::ck_err(&p, e))?;
        std::fs::write(&p, text).map_err(|e| Self::ck_err(&p, e))
    }

    /// Continues from a checkpoint directory: the last weights, the epoch counter and the best model.
    pub(crate) fn resume(&mut self, dir: &Path) -> Result<(), LstmError> {
        let p = dir.join("state.json");
        let text = std::fs::read_to_string(&p).map_err(|e| Self::ck_err(&p, e))?;
        let state: State = serde_json::from_str(&text).map_err(|e| Self::ck_err(&p, e))?;
        if state.dims != self.net.dims {
            return Err(Self::ck_err(&p, format!("was trained on inputs {:?}, not {:?}", state.dims, self.net.dims)));
        }
        self.load(&dir.join("best.safetensors"))?;
        self.best = Some((state.best_epoch, state.best_mcc, snapshot(&self.vs)));
        self.load(&dir.join("last.safetensors"))?;
        self.epoch = state.epoch;
        Ok(())
    }

    /// Loads a weights file; one written before the optimizer's state was saved loads with fresh moments.
    fn load(&mut self, path: &Path) -> Result<(), LstmError> {
        let missing = self.vs.load_partial(path)?;
        if let Some(name) = missing.iter().find(|n| !crate::ml::optim::Adam::is_state(n)) {
            return Err(Self::ck_err(path, format!("has no variable {name}: it belongs to another network")));
        }
        if missing.is_empty() {
            self.opt.load_steps()?;
        } else {
            log::warn!("{} carries no optimizer state (an older tradebot): AdamW's moments restart", path.display());
            self.opt.reset();
        }
        Ok(())
    }
}
