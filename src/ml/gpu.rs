//! GPU utilisation sampled through NVML (the `nvml-wrapper` crate, `libnvidia-ml` loaded at run time):
//! how busy the GPU was (the share of time a kernel ran), its memory in use and its power, a sample every
//! `interval` on a thread of its own while the measured work runs. Where there is no NVIDIA driver,
//! `GpuSampler::start` says so and nothing else changes. Trainers show the readings in their progress
//! (`take_recent`, the window since the last progress line); the daemon caps a retrain child's GPU memory
//! with libtorch's allocator setting (`alloc_conf`). Everything here is asked for by CUDA ordinal (what
//! libtorch and the kernels run on) and read from that device's NVML GPU, matched by the device's own UUID
//! or PCI bus id (`nvml_map`), whatever `CUDA_VISIBLE_DEVICES` and CUDA's device order say.

pub(crate) mod nvml_map;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nvml_map::{CudaIds, MatchError, NvmlGpu};

/// Why a GPU cannot be read through NVML.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum GpuError {
    #[error("NVML (the NVIDIA driver's libnvidia-ml) is not available: {0}")]
    NoNvml(String),
    #[error("NVML cannot count the GPUs: {0}")]
    Count(String),
    #[error("NVML has no GPU {index}: {reason}")]
    NoGpu { index: u32, reason: String },
    #[error("NVML: {0}")]
    Match(#[from] MatchError),
    #[error("NVML GPU index {0} out of range")]
    Index(usize),
    #[error("NVML cannot read GPU {index}'s memory: {reason}")]
    Memory { index: u32, reason: String },
    #[error("cannot start the GPU sampling thread: {0}")]
    Thread(String),
    #[error("the GPU sampling thread ended before it started")]
    ThreadEnded,
}

/// CUDA device `ordinal`'s own UUID and PCI bus id, read from the driver (no context is created); `None`
/// without a driver or such a device.
#[allow(unsafe_code)]
fn cuda_ids(ordinal: usize) -> Option<CudaIds> {
    use cudarc::driver::{result, sys};
    // SAFETY: only tries dlopen on candidate names and closes what it opened.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    result::init().ok()?;
    let dev = result::device::get(i32::try_from(ordinal).ok()?).ok()?;
    let uuid = result::device::get_uuid(dev).ok().map(|u| nvml_map::cuda_uuid_string(u.bytes.map(|b| b as u8)));
    let mut buf = [0 as std::ffi::c_char; 32];
    // SAFETY: the driver is initialised, `dev` one of its devices, `buf` holds the 32 bytes `len` gives.
    let ok =
        unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, dev) } == sys::CUresult::CUDA_SUCCESS;
    let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    let pci_bus_id = ok.then(|| String::from_utf8_lossy(&bytes).to_string());
    Some(CudaIds { uuid, pci_bus_id })
}

/// The GPUs NVML lists, with their UUIDs, bus ids, names and MIG instances.
fn nvml_gpus(nvml: &nvml_wrapper::Nvml) -> Result<Vec<NvmlGpu>, GpuError> {
    let n = nvml.device_count().map_err(|e| GpuError::Count(e.to_string()))?;
    (0..n)
        .map(|i| {
            let d = nvml.device_by_index(i).map_err(|e| GpuError::NoGpu { index: i, reason: e.to_string() })?;
            let mig_uuids = (0..8).map_while(|m| d.mig_device_by_index(m).ok()?.uuid().ok()).collect();
            Ok(NvmlGpu {
                uuid: d.uuid().unwrap_or_default(),
                pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                name: d.name().unwrap_or_default(),
                mig_uuids,
            })
        })
        .collect()
}

/// The NVML index of CUDA device `cuda_ordinal` (see `nvml_index_in`).
#[cfg(all(test, feature = "gpu-tests"))]
fn nvml_index(cuda_ordinal: usize) -> Result<u32, GpuError> {
    nvml_index_in(&nvml()?, cuda_ordinal)
}

/// The NVML index of CUDA device `cuda_ordinal`: by its own UUID or PCI bus id, else by
/// `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER` as CUDA reads them.
fn nvml_index_in(nvml: &nvml_wrapper::Nvml, cuda_ordinal: usize) -> Result<u32, GpuError> {
    let gpus = nvml_gpus(nvml)?;
    let by_ids = cuda_ids(cuda_ordinal).and_then(|ids| nvml_map::match_by_ids(&ids, &gpus));
    let index = match by_ids {
        Some(i) => i,
        None => {
            let var = |k: &str| std::env::var(k).ok();
            nvml_map::match_by_order(
                cuda_ordinal,
                var("CUDA_VISIBLE_DEVICES").as_deref(),
                var("CUDA_DEVICE_ORDER").as_deref(),
                &gpus,
            )?
        }
    };
    log::debug!("NVML: cuda:{cuda_ordinal} is NVML GPU {index} ({})", gpus[index].pci_bus_id);
    u32::try_from(index).map_err(|_| GpuError::Index(index))
}

/// NVML itself, or why not.
fn nvml() -> Result<nvml_wrapper::Nvml, GpuError> {
    nvml_wrapper::Nvml::init().map_err(|e| GpuError::NoNvml(e.to_string()))
}

/// One NVML reading.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Sample {
    /// Percent of the last sample period during which a kernel ran.
    pub busy_pct: f64,
    pub memory_used_mb: f64,
    pub power_w: f64,
}

/// What a run of samples says.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub(crate) struct GpuStats {
    pub samples: usize,
    pub busy_mean_pct: f64,
    pub busy_min_pct: f64,
    pub memory_max_mb: f64,
    pub power_mean_w: f64,
}

impl GpuStats {
    /// The fields a trainer's progress line carries: mean busy %, peak memory (MiB), mean power (W).
    pub(crate) fn progress_fields(&self) -> [(&'static str, f64); 3] {
        [
            ("gpu_busy_pct", self.busy_mean_pct),
            ("gpu_memory_mb", self.memory_max_mb),
            ("gpu_power_w", self.power_mean_w),
        ]
    }

    /// "gpu 97% · 5123 MiB · 310 W", for progress bars; a reading NVML could not make is left out.
    pub(crate) fn short(&self) -> String {
        let parts = [(self.busy_mean_pct, "%"), (self.memory_max_mb, " MiB"), (self.power_mean_w, " W")];
        let shown: Vec<String> =
            parts.iter().filter(|(x, _)| x.is_finite()).map(|(x, unit)| format!("{x:.0}{unit}")).collect();
        format!("gpu {}", shown.join(" · "))
    }

    /// Two runs' figures as one: the means weighed by their samples, the minimum and the peak of both.
    pub(crate) fn merge(a: &GpuStats, b: &GpuStats) -> GpuStats {
        let n = (a.samples + b.samples).max(1) as f64;
        let mean = |x: f64, y: f64| (x * a.samples as f64 + y * b.samples as f64) / n;
        GpuStats {
            samples: a.samples + b.samples,
            busy_mean_pct: mean(a.busy_mean_pct, b.busy_mean_pct),
            busy_min_pct: a.busy_min_pct.min(b.busy_min_pct),
            memory_max_mb: a.memory_max_mb.max(b.memory_max_mb),
            power_mean_w: mean(a.power_mean_w, b.power_mean_w),
        }
    }

    pub(crate) fn of(samples: &[Sample]) -> GpuStats {
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
pub(crate) struct GpuSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Sample>>>,
    /// The samples since the last `take_recent`.
    recent: Arc<Mutex<Vec<Sample>>>,
}

impl GpuSampler {
    /// Starts sampling the GPU of CUDA device `cuda_ordinal` every `interval`; an error (no driver, no
    /// such GPU) says why.
    pub(crate) fn start(cuda_ordinal: usize, interval: Duration) -> Result<GpuSampler, GpuError> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), GpuError>>();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let recent = Arc::new(Mutex::new(Vec::new()));
        let window = recent.clone();
        let thread = std::thread::Builder::new()
            .name("gpu-sampler".into())
            .spawn(move || {
                let nvml = match nvml() {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Vec::new();
                    }
                };
                let device = match nvml_index_in(&nvml, cuda_ordinal).and_then(|i| {
                    nvml.device_by_index(i).map_err(|e| GpuError::NoGpu { index: i, reason: e.to_string() })
                }) {
                    Ok(d) => d,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Vec::new();
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut samples = Vec::new();
                // The first reading one interval in: NVML's busy % is over its own last period, which
                // would otherwise reach back before the start.
                loop {
                    std::thread::sleep(interval);
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    let busy = device.utilization_rates().map(|u| f64::from(u.gpu)).unwrap_or(f64::NAN);
                    let mem = device.memory_info().map(|m| m.used as f64 / (1024.0 * 1024.0)).unwrap_or(f64::NAN);
                    let power = device.power_usage().map(|mw| f64::from(mw) / 1000.0).unwrap_or(f64::NAN);
                    let sample = Sample { busy_pct: busy, memory_used_mb: mem, power_w: power };
                    samples.push(sample);
                    if let Ok(mut w) = window.lock() {
                        w.push(sample);
                    }
                }
                samples
            })
            .map_err(|e| GpuError::Thread(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(GpuSampler { stop, thread: Some(thread), recent }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(GpuError::ThreadEnded),
        }
    }

    /// The summary of the samples taken since the last call (`None` before the first sample).
    pub(crate) fn take_recent(&self) -> Option<GpuStats> {
        let taken = std::mem::take(&mut *self.recent.lock().ok()?);
        (!taken.is_empty()).then(|| GpuStats::of(&taken))
    }

    /// Stops sampling; the samples' summary.
    pub(crate) fn stop(mut self) -> GpuStats {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default();
        GpuStats::of(&samples)
    }
}

impl Drop for GpuSampler {
    /// A sampler dropped without `stop` (a trainer's progress at the end of a run) ends its thread too.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The total memory in MiB of CUDA device `cuda_ordinal`'s GPU, by NVML.
pub(crate) fn total_memory_mb(cuda_ordinal: usize) -> Result<u64, GpuError> {
    let nvml = nvml()?;
    let index = nvml_index_in(&nvml, cuda_ordinal)?;
    let device = nvml.device_by_index(index).map_err(|e| GpuError::NoGpu { index, reason: e.to_string() })?;
    let info = device.memory_info().map_err(|e| GpuError::Memory { index, reason: e.to_string() })?;
    Ok(info.total / (1024 * 1024))
}

/// libtorch's allocator settings (`PYTORCH_CUDA_ALLOC_CONF`, comma-separated `key:value`) with the
/// per-process memory fraction that holds a process to `budget_mb` of a GPU of `total_mb`: the other
/// settings kept, an earlier fraction replaced. libtorch then fails an allocation past the budget with its
/// out-of-memory error, inside the trainer, instead of the GPU filling up.
pub(crate) fn alloc_conf(budget_mb: u64, total_mb: u64, existing: Option<&str>) -> String {
    let fraction = if total_mb == 0 { 1.0 } else { (budget_mb as f64 / total_mb as f64).clamp(0.0, 1.0) };
    let mut parts: Vec<String> = existing
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && p.split(':').next().map(str::trim) != Some("per_process_memory_fraction"))
        .map(str::to_string)
        .collect();
    parts.push(format!("per_process_memory_fraction:{fraction:.4}"));
    parts.join(",")
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

    #[test]
    fn the_memory_budget_becomes_an_allocator_fraction_beside_other_settings() {
        assert_eq!(alloc_conf(8_000, 80_000, None), "per_process_memory_fraction:0.1000");
        assert_eq!(
            alloc_conf(40_000, 80_000, Some("expandable_segments:True, per_process_memory_fraction:0.9")),
            "expandable_segments:True,per_process_memory_fraction:0.5000"
        );
        // A budget above the GPU's memory is the whole GPU, not a fraction above 1 libtorch would refuse.
        assert_eq!(alloc_conf(200_000, 80_000, Some("")), "per_process_memory_fraction:1.0000");
    }

    #[test]
    fn progress_shows_the_window_mean_busy_peak_memory_and_mean_power() {
        let s = |busy, mem, power| Sample { busy_pct: busy, memory_used_mb: mem, power_w: power };
        let st = GpuStats::of(&[s(90.0, 1000.0, 300.0), s(100.0, 1200.0, 350.0)]);
        assert_eq!(st.progress_fields(), [("gpu_busy_pct", 95.0), ("gpu_memory_mb", 1200.0), ("gpu_power_w", 325.0)]);
        assert_eq!(st.short(), "gpu 95% · 1200 MiB · 325 W");
    }

    /// Without an NVIDIA driver (CI), starting says so instead of panicking; with one, samples come.
    #[test]
    fn the_sampler_starts_or_says_why() {
        match GpuSampler::start(0, Duration::from_millis(10)) {
            Ok(s) => {
                std::thread::sleep(Duration::from_millis(50));
                assert!(s.take_recent().is_some_and(|w| w.samples >= 1));
                assert!(s.stop().samples >= 1);
            }
            Err(e) => {
                assert!(e.to_string().contains("NVML"), "{e}");
                assert!(!std::path::Path::new("/dev/nvidiactl").exists(), "a driver is present but NVML failed: {e}");
            }
        }
    }

    /// Needs a CUDA GPU (feature `gpu-tests`, `make test-gpu`): fails without one.
    #[cfg(feature = "gpu-tests")]
    mod gpu_tests {
        use super::*;

        /// On a GPU, `cuda:0` is found in NVML's list by its own UUID (its bus id agreeing), and the index
        /// the sampler and the memory cap use is that one.
        #[test]
        fn on_a_gpu_cuda_0_is_its_nvml_gpu_by_its_own_ids() {
            let ids = cuda_ids(0).expect("no CUDA device 0: this test needs a GPU");
            let gpus = nvml_gpus(&nvml().unwrap()).unwrap();
            let i = nvml_map::match_by_ids(&ids, &gpus).unwrap_or_else(|| panic!("{ids:?} is none of {gpus:?}"));
            let pci = |s: &Option<String>| s.as_deref().and_then(nvml_map::pci_key);
            assert_eq!(pci(&ids.pci_bus_id), pci(&Some(gpus[i].pci_bus_id.clone())), "{ids:?} vs {:?}", gpus[i]);
            assert_eq!(nvml_index(0), Ok(i as u32));
            assert!(total_memory_mb(0).unwrap() > 1024);
        }
    }
}
