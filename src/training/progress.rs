//! Training progress for people and for the retrain child: a bar on a terminal, a plain line per step
//! on a pipe, JSON lines (`{"event": "progress" | "epoch", ...}`) with `--json`.

use super::emit;
use crate::lstm::train::EpochStats;
use crate::rl::ppo::UpdateStats;
use serde_json::json;
use std::io::IsTerminal;
use std::time::Instant;
use tch::Device;

/// Live progress: a bar on a terminal, JSON lines with `--json`, else one line per update on stderr.
pub struct PpoProgress {
    json: bool,
    bar: Option<indicatif::ProgressBar>,
    total_updates: u64,
    total_steps: u64,
    started: Instant,
    steps_at_start: u64,
}

impl PpoProgress {
    pub fn new(json: bool, total_updates: u64, total_steps: u64, steps_done: u64) -> PpoProgress {
        let bar = (!json && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(total_steps);
            let style = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} steps {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            b.set_style(style);
            b.set_position(steps_done);
            b
        });
        PpoProgress { json, bar, total_updates, total_steps, started: Instant::now(), steps_at_start: steps_done }
    }

    pub fn update(&self, s: &UpdateStats) {
        let done = s.env_steps.saturating_sub(self.steps_at_start) as f64;
        let rate = done / self.started.elapsed().as_secs_f64().max(1e-9);
        let eta_secs = self.total_steps.saturating_sub(s.env_steps) as f64 / rate.max(1e-9);
        if self.json {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("event".into(), "progress".into());
                o.insert("total_updates".into(), self.total_updates.into());
                o.insert("total_steps".into(), self.total_steps.into());
                o.insert("eta_secs".into(), eta_secs.into());
            }
            emit(&v);
            return;
        }
        let ret = s.mean_return.map_or("-".to_string(), |r| format!("{r:+.4}"));
        let msg = format!(
            "update {}/{} | {:.0} steps/s | return {ret} | kl {:.4} | clip {:.3} | ev {:.3} | eta {}",
            s.update,
            self.total_updates,
            rate,
            s.approx_kl,
            s.clip_fraction,
            s.explained_variance,
            eta(eta_secs)
        );
        match &self.bar {
            Some(b) => {
                b.set_position(s.env_steps.min(self.total_steps));
                b.set_message(msg);
            }
            None => eprintln!("{msg}"),
        }
    }

    /// Leaves the bar where training stopped (a time budget may end it before the last step).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.abandon();
        }
    }
}

/// The LSTM trainer's progress: JSON lines, a progress bar on a terminal, or a plain line per epoch.
pub struct LstmProgress {
    json: bool,
    max_epochs: usize,
    bar: Option<indicatif::ProgressBar>,
}

impl LstmProgress {
    pub fn new(json: bool, max_epochs: usize, done: usize) -> Self {
        let bar = (!json && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(max_epochs as u64);
            b.set_position(done as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template("epoch {pos}/{len} [{bar:20}] ETA {eta} {msg}") {
                // The ETA as everywhere else (`3m05s`), not indicatif's `3m 5.90 s`.
                let style = style.with_key("eta", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&eta(s.eta().as_secs_f64()));
                });
                b.set_style(style);
            }
            b
        });
        LstmProgress { json, max_epochs, bar }
    }

    pub fn start(&self, device: &Device, tr: usize, va: usize, te: usize) {
        let dev = super::device_name(*device);
        if self.json {
            println!(
                "{}",
                json!({"event": "progress", "stage": "dataset", "device": dev, "train": tr, "valid": va, "test": te})
            );
        } else {
            eprintln!("training on {dev}: {tr} train, {va} validation, {te} test samples");
        }
    }

    pub fn epoch(&self, s: &EpochStats, train: usize) {
        let line = format!(
            "{:.2} s, {:.0} samples/s, loss {:.4}, val MCC {:.4} acc {:.4} F1 {:.4} (best {:.4} at {})",
            s.epoch_secs,
            s.samples_per_sec,
            s.train_loss,
            s.val_mcc,
            s.val_accuracy,
            s.val_macro_f1,
            s.best_mcc,
            s.best_epoch
        );
        if self.json {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("event".into(), json!("epoch"));
                o.insert("train_samples".into(), json!(train));
                o.insert("max_epochs".into(), json!(self.max_epochs));
            }
            println!("{v}");
        } else if let Some(b) = &self.bar {
            b.set_position(s.epoch as u64);
            b.set_message(line);
        } else {
            println!("epoch {}: {line}", s.epoch);
        }
    }

    /// Leaves the bar at the last epoch run: an early stop at epoch 57 of 500 shows 57/500.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.abandon();
        }
    }
}

/// Formats seconds as `1h02m`, `3m05s` or `42s`.
pub fn eta(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eta_reads_well() {
        assert_eq!(super::eta(42.4), "42s");
        assert_eq!(super::eta(185.0), "3m05s");
        assert_eq!(super::eta(3720.0), "1h02m");
        assert_eq!(super::eta(-3.0), "0s");
    }
}
