//! GPU utilisation sampled through NVML (the `nvml-wrapper` crate, `libnvidia-ml` loaded at run time):
//! how busy the GPU was (the share of time a kernel ran), its memory in use and its power, a sample every
//! `interval` on a thread of its own while the measured work runs. Where there is no NVIDIA driver,
//! `GpuSampler::start` says so and nothing else changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// One NVML reading.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Sample {
    /// Percent of the last sample period during which a kernel ran.
    pub busy_pct: f64,
    pub memory_used_mb: f64,
    pub power_w: f64,
}

/// What a run of samples says.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct GpuStats {
    pub samples: usize,
    pub busy_mean_pct: f64,
    pub busy_min_pct: f64,
    pub memory_max_mb: f64,
    pub power_mean_w: f64,
}

impl GpuStats {
    pub fn of(samples: &[Sample]) -> GpuStats {
        if samples.is_empty() {
            return GpuStats::default();
        }
        let n = samples.len() as f64;
        GpuStats {
            samples: samples.len(),
            busy_mean_pct: samples.iter().map(|s| s.busy_pct).sum::<f64>() / n,
            busy_min_pct: samples.iter().map(|s| s.busy_pct).fold(f64::INFINITY, f64::min),
            memory_max_mb: samples.iter().map(|s| s.memory_used_mb).fold(0.0, f64::max),
            power_mean_w: samples.iter().map(|s| s.power_w).sum::<f64>() / n,
        }
    }
}

/// A sampling thread; `stop` ends it and returns what it saw.
pub struct GpuSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Sample>>,
}

impl GpuSampler {
    /// Starts sampling GPU `index` every `interval`; an error (no driver, no such GPU) says why.
    pub fn start(index: u32, interval: Duration) -> Result<GpuSampler, String> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gpu-sampler".into())
            .spawn(move || {
                let nvml = match nvml_wrapper::Nvml::init() {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = ready_tx
                            .send(Err(format!("NVML (the NVIDIA driver's libnvidia-ml) is not available: {e}")));
                        return Vec::new();
                    }
                };
                let device = match nvml.device_by_index(index) {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("NVML has no GPU {index}: {e}")));
                        return Vec::new();
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut samples = Vec::new();
                while !flag.load(Ordering::Relaxed) {
                    let busy = device.utilization_rates().map(|u| f64::from(u.gpu)).unwrap_or(f64::NAN);
                    let mem = device.memory_info().map(|m| m.used as f64 / (1024.0 * 1024.0)).unwrap_or(f64::NAN);
                    let power = device.power_usage().map(|mw| f64::from(mw) / 1000.0).unwrap_or(f64::NAN);
                    samples.push(Sample { busy_pct: busy, memory_used_mb: mem, power_w: power });
                    std::thread::sleep(interval);
                }
                samples
            })
            .map_err(|e| format!("cannot start the GPU sampling thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(GpuSampler { stop, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err("the GPU sampling thread ended before it started".into()),
        }
    }

    /// Stops sampling; the samples' summary.
    pub fn stop(self) -> GpuStats {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().unwrap_or_default();
        GpuStats::of(&samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_summarise_the_samples() {
        let s = |busy, mem, power| Sample { busy_pct: busy, memory_used_mb: mem, power_w: power };
        let st = GpuStats::of(&[s(90.0, 1000.0, 300.0), s(100.0, 1200.0, 350.0), s(95.0, 1100.0, 325.0)]);
        assert_eq!(st.samples, 3);
        assert!((st.busy_mean_pct - 95.0).abs() < 1e-12 && st.busy_min_pct == 90.0);
        assert!((st.memory_max_mb - 1200.0).abs() < 1e-12 && (st.power_mean_w - 325.0).abs() < 1e-12);
        assert_eq!(GpuStats::of(&[]), GpuStats::default());
    }

    /// Without an NVIDIA driver (CI), starting says so instead of panicking; with one, samples come.
    #[test]
    fn the_sampler_starts_or_says_why() {
        match GpuSampler::start(0, Duration::from_millis(10)) {
            Ok(s) => {
                std::thread::sleep(Duration::from_millis(50));
                assert!(s.stop().samples >= 1);
            }
            Err(e) => {
                assert!(e.contains("NVML"), "{e}");
                assert!(!std::path::Path::new("/dev/nvidiactl").exists(), "a driver is present but NVML failed: {e}");
            }
        }
    }
}
