//! Training progress for people and for the retrain child: a bar on a terminal, a plain line per step
//! on a pipe, JSON lines (`{"event": "progress" | "epoch", ...}`) with `--json`. On a CUDA device each
//! line also carries the GPU's utilisation since the previous line, sampled by NVML (`gpu_busy_pct`,
//! `gpu_memory_mb`, `gpu_power_w`; `crate::ml::gpu`).

use super::device::Ran;
use super::emit;
use crate::lstm::train::EpochStats;
use crate::ml::gpu::{GpuSampler, GpuStats};
use crate::out::outln;
use crate::rl::ppo::UpdateStats;
use serde_json::json;
use std::io::IsTerminal;
use std::time::Instant;
use tch::Device;

/// Live progress: a bar on a terminal, JSON lines with `--json`, else one line per update on stderr.
pub(crate) struct PpoProgress {
    json: bool,
    bar: Option<indicatif::ProgressBar>,
    total_updates: u64,
    total_steps: u64,
    started: Instant,
    steps_at_start: u64,
    gpu: Option<GpuSampler>,
    /// The device and env that run, on each JSON line.
    ran: Option<Ran>,
}

/// Samples the GPU behind `device` every 250 ms, or `None` (said once) where NVML cannot.
fn sampler(device: Device) -> Option<GpuSampler> {
    let Device::Cuda(i) = device else { return None };
    match GpuSampler::start(i, std::time::Duration::from_millis(250)) {
        Ok(s) => Some(s),
        Err(e) => {
            log::info!("the GPU's utilisation is not shown in the progress: {e}");
            None
        }
    }
}

/// Adds the GPU window's fields to a JSON progress line.
fn add_gpu(v: &mut serde_json::Value, gpu: Option<&GpuStats>) {
    if let (Some(o), Some(g)) = (v.as_object_mut(), gpu) {
        for (k, x) in g.progress_fields() {
            if x.is_finite() {
                o.insert(k.into(), json!(x));
            }
        }
    }
}

/// " | gpu 97% · 5123 MiB · 310 W", or nothing without a GPU window.
fn gpu_text(gpu: Option<&GpuStats>) -> String {
    gpu.map(|g| format!(" | {}", g.short())).unwrap_or_default()
}

impl PpoProgress {
    pub(crate) fn new(json: bool, total_updates: u64, total_steps: u64, steps_done: u64) -> PpoProgress {
        let bar = (!json && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(total_steps);
            let style = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} steps {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            b.set_style(style);
            b.set_position(steps_done);
            crate::logging::bridge::show(&b);
            b
        });
        PpoProgress {
            json,
            bar,
            total_updates,
            total_steps,
            started: Instant::now(),
            steps_at_start: steps_done,
            gpu: None,
            ran: None,
        }
    }

    /// Shows the utilisation of `device`'s GPU with each update (nothing on the CPU).
    pub(crate) fn with_gpu(mut self, device: Device) -> Self {
        self.gpu = sampler(device);
        self
    }

    /// Names the device and env that run (`device`, `env`) on each JSON line.
    pub(crate) fn with_ran(mut self, ran: &Ran) -> Self {
        self.ran = Some(ran.clone());
        self
    }

    pub(crate) fn update(&self, s: &UpdateStats) {
        let done = s.env_steps.saturating_sub(self.steps_at_start) as f64;
        let rate = done / self.started.elapsed().as_secs_f64().max(1e-9);
        let eta_secs = self.total_steps.saturating_sub(s.env_steps) as f64 / rate.max(1e-9);
        let gpu = self.gpu.as_ref().and_then(GpuSampler::take_recent);
        if self.json {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("event".into(), "progress".into());
                o.insert("total_updates".into(), self.total_updates.into());
                o.insert("total_steps".into(), self.total_steps.into());
                o.insert("eta_secs".into(), eta_secs.into());
            }
            add_gpu(&mut v, gpu.as_ref());
            if let Some(ran) = &self.ran {
                ran.tag(&mut v);
            }
            emit(&v);
            return;
        }
        let ret = s.mean_return.map_or("-".to_string(), |r| format!("{r:+.4}"));
        let msg = format!(
            "update {}/{} | {:.0} steps/s | return {ret} | kl {:.4} | clip {:.3} | ev {:.3}{} | eta {}",
            s.update,
            self.total_updates,
            rate,
            s.approx_kl,
            s.clip_fraction,
            s.explained_variance,
            gpu_text(gpu.as_ref()),
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
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.abandon();
            crate::logging::bridge::hide();
        }
    }
}

impl Drop for PpoProgress {
    fn drop(&mut self) {
        if self.bar.is_some() {
            crate::logging::bridge::hide();
        }
    }
}

/// The LSTM trainer's progress: JSON lines, a progress bar on a terminal, or a plain line per epoch.
pub(crate) struct LstmProgress {
    json: bool,
    max_epochs: usize,
    bar: Option<indicatif::ProgressBar>,
    gpu: Option<GpuSampler>,
}

impl LstmProgress {
    pub(crate) fn new(json: bool, max_epochs: usize, done: usize) -> Self {
        let bar = (!json && std::io::stderr().is_terminal()).then(|| indicatif::ProgressBar::new(max_epochs as u64));
        Self::with_bar(json, max_epochs, done, bar)
    }

    /// With `bar` (a terminal's) shown, log lines written around it (`logging::bridge`), not onto its line.
    fn with_bar(json: bool, max_epochs: usize, done: usize, bar: Option<indicatif::ProgressBar>) -> Self {
        let bar = bar.inspect(|b| {
            b.set_position(done as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template("epoch {pos}/{len} [{bar:20}] ETA {eta} {msg}") {
                // The ETA as everywhere else (`3m05s`), not indicatif's `3m 5.90 s`.
                let style = style.with_key("eta", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&eta(s.eta().as_secs_f64()));
                });
                b.set_style(style);
            }
            crate::logging::bridge::show(b);
        });
        LstmProgress { json, max_epochs, bar, gpu: None }
    }

    /// Shows the utilisation of `device`'s GPU with each epoch (nothing on the CPU).
    pub(crate) fn with_gpu(mut self, device: Device) -> Self {
        self.gpu = sampler(device);
        self
    }

    pub(crate) fn start(&self, device: &Device, tr: usize, va: usize, te: usize) {
        let dev = super::device_name(*device);
        if self.json {
            // A progress line that cannot be written is dropped (as `emit` drops it): the run goes on.
            let _ = outln!(
                "{}",
                json!({"event": "progress", "stage": "dataset", "device": dev, "train": tr, "valid": va, "test": te})
            );
        } else {
            eprintln!("training on {dev}: {tr} train, {va} validation, {te} test samples");
        }
    }

    pub(crate) fn epoch(&self, s: &EpochStats, train: usize) {
        let gpu = self.gpu.as_ref().and_then(GpuSampler::take_recent);
        let line = format!(
            "{:.2} s, {:.0} samples/s, loss {:.4}, val MCC {:.4} acc {:.4} F1 {:.4} (best {:.4} at {}){}",
            s.epoch_secs,
            s.samples_per_sec,
            s.train_loss,
            s.val_mcc,
            s.val_accuracy,
            s.val_macro_f1,
            s.best_mcc,
            s.best_epoch,
            gpu_text(gpu.as_ref())
        );
        if self.json {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("event".into(), json!("epoch"));
                o.insert("train_samples".into(), json!(train));
                o.insert("max_epochs".into(), json!(self.max_epochs));
            }
            add_gpu(&mut v, gpu.as_ref());
            let _ = outln!("{v}");
        } else if let Some(b) = &self.bar {
            b.set_position(s.epoch as u64);
            b.set_message(line);
        } else {
            let _ = outln!("epoch {}: {line}", s.epoch);
        }
    }

    /// Leaves the bar at the last epoch run: an early stop at epoch 57 of 500 shows 57/500.
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.abandon();
            crate::logging::bridge::hide();
        }
    }
}

impl Drop for LstmProgress {
    fn drop(&mut self) {
        if self.bar.is_some() {
            crate::logging::bridge::hide();
        }
    }
}

/// Formats seconds as `1h02m`, `3m05s` or `42s`.
pub(crate) fn eta(secs: f64) -> String {
    crate::domain::duration_words(secs)
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

    /// `train lstm` on a terminal: a log line while the bar is shown clears the bar's line first and
    /// the bar is drawn again after it, never the line written onto the bar (issue 36); after the run
    /// lines go straight out again.
    #[test]
    fn a_log_line_during_the_lstm_bar_is_written_around_it() {
        use std::sync::{Arc, Mutex};
        type Ops = Arc<Mutex<Vec<String>>>;
        #[derive(Debug)]
        struct Term(Ops);
        impl indicatif::TermLike for Term {
            fn width(&self) -> u16 {
                100
            }
            fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
                self.0.lock().unwrap().push(format!("up {n}"));
                Ok(())
            }
            fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
                Ok(())
            }
            fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
                Ok(())
            }
            fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
                Ok(())
            }
            fn write_line(&self, s: &str) -> std::io::Result<()> {
                self.0.lock().unwrap().push(format!("bar {s}"));
                Ok(())
            }
            fn write_str(&self, s: &str) -> std::io::Result<()> {
                self.0.lock().unwrap().push(format!("bar {s}"));
                Ok(())
            }
            fn clear_line(&self) -> std::io::Result<()> {
                self.0.lock().unwrap().push("clear".into());
                Ok(())
            }
            fn flush(&self) -> std::io::Result<()> {
                Ok(())
            }
        }
        struct Stderr(Ops);
        impl log::Log for Stderr {
            fn enabled(&self, _: &log::Metadata) -> bool {
                true
            }
            fn log(&self, rec: &log::Record) {
                self.0.lock().unwrap().push(format!("log {}", rec.args()));
            }
            fn flush(&self) {}
        }
        let ops: Ops = Arc::default();
        let target = indicatif::ProgressDrawTarget::term_like(Box::new(Term(ops.clone())));
        let p = super::LstmProgress::with_bar(
            false,
            10,
            0,
            Some(indicatif::ProgressBar::with_draw_target(Some(10), target)),
        );
        let stats = crate::lstm::train::EpochStats {
            epoch: 3,
            train_loss: 0.69,
            val_loss: 0.7,
            val_accuracy: 0.5,
            val_macro_f1: 0.4,
            val_mcc: 0.01,
            epoch_secs: 1.5,
            samples_per_sec: 1000.0,
            best_epoch: 3,
            best_mcc: 0.01,
        };
        p.epoch(&stats, 100);
        assert!(crate::logging::bridge::showing());
        crate::logging::log_through_tee(&Stderr(ops.clone()), "retrain: a line");
        let seen = ops.lock().unwrap().clone();
        let at = seen.iter().position(|o| o == "log retrain: a line").unwrap_or_else(|| panic!("{seen:?}"));
        let last_draw = seen[..at].iter().rposition(|o| o.starts_with("bar ")).unwrap_or_else(|| panic!("{seen:?}"));
        assert!(
            seen[last_draw..at].contains(&"clear".to_string()),
            "the bar's line is not cleared before the log line: {seen:?}"
        );
        assert!(seen[at + 1..].iter().any(|o| o.starts_with("bar ")), "the bar is not drawn again: {seen:?}");
        p.finish();
        drop(p);
        assert!(!crate::logging::bridge::showing(), "the bar is gone: lines go straight out");
    }

    /// A GPU window adds its three fields (a reading NVML could not make is left out) and a bar suffix;
    /// no window adds nothing.
    #[test]
    fn a_gpu_window_rides_on_the_progress_line() {
        use crate::ml::gpu::{GpuStats, Sample};
        let s = |busy, mem| Sample { busy_pct: busy, memory_used_mb: mem, power_w: f64::NAN };
        let g = GpuStats::of(&[s(96.0, 5000.0), s(98.0, 5100.0)]);
        let mut v = serde_json::json!({"event": "progress"});
        super::add_gpu(&mut v, Some(&g));
        assert_eq!(v["gpu_busy_pct"], 97.0);
        assert_eq!(v["gpu_memory_mb"], 5100.0);
        assert!(v.get("gpu_power_w").is_none(), "{v}");
        let mut plain = serde_json::json!({"event": "progress"});
        super::add_gpu(&mut plain, None);
        assert_eq!(plain, serde_json::json!({"event": "progress"}));
        assert_eq!(super::gpu_text(Some(&g)), " | gpu 97% · 5100 MiB");
        assert_eq!(super::gpu_text(None), "");
    }
}
