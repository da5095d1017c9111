//! `tradebot doctor`'s GPU section: the CUDA driver and its version, each visible CUDA device's compute
//! capability, NVRTC (version, file), NVML (driver version, each GPU's name and memory), libtorch's CUDA,
//! and the env kernel compiled and loaded on the first device. `doctor --gpu` (the first step of
//! `make gpu-check`) needs all of it: where something is missing it ends with "no GPU: <reason>" (no driver
//! or no device) or "GPU not usable: <reason>", exit status 1, in seconds.

use std::fmt;

/// Why a GPU cannot be used: none at all, or one that the training path cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "train"), allow(dead_code))]
pub(super) enum GpuProblem {
    NoGpu(String),
    Unusable(String),
}

impl fmt::Display for GpuProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuProblem::NoGpu(why) => write!(f, "no GPU: {why}"),
            GpuProblem::Unusable(why) => write!(f, "GPU not usable: {why}"),
        }
    }
}

/// The section's lines (label, text) and the first problem found, if any.
pub(super) struct GpuReport {
    pub lines: Vec<(&'static str, String)>,
    pub problem: Option<GpuProblem>,
}

impl GpuReport {
    #[cfg_attr(not(feature = "train"), allow(dead_code))]
    fn fail(&mut self, p: GpuProblem) {
        self.problem.get_or_insert(p);
    }
}

#[cfg(not(feature = "train"))]
pub(super) fn check() -> GpuReport {
    let why = "this tradebot was built without the `train` feature (libtorch, CUDA): rebuild with default features";
    GpuReport { lines: vec![("gpu:", format!("not checked: {why}"))], problem: Some(GpuProblem::NoGpu(why.into())) }
}

#[cfg(feature = "train")]
pub(super) fn check() -> GpuReport {
    use crate::env::kernel::probe;
    let mut r = GpuReport { lines: Vec::new(), problem: None };
    let devices = match probe::driver() {
        Ok(d) => {
            let (major, minor) = d.cuda_version;
            r.lines.push(("cuda driver:", format!("CUDA {major}.{minor}, {} device(s) visible", d.devices.len())));
            for x in &d.devices {
                let (ma, mi) = x.compute_capability;
                let line = format!("cuda:{} {}, compute capability {ma}.{mi}, {} MiB", x.ordinal, x.name, x.memory_mib);
                r.lines.push(("cuda device:", line));
            }
            if d.devices.is_empty() {
                let visible = std::env::var("CUDA_VISIBLE_DEVICES")
                    .map(|v| format!(" (CUDA_VISIBLE_DEVICES={v})"))
                    .unwrap_or_default();
                r.fail(GpuProblem::NoGpu(format!("the CUDA driver sees no device{visible}")));
            }
            d.devices
        }
        Err(why) => {
            r.lines.push(("cuda driver:", format!("not found: {why}")));
            r.fail(GpuProblem::NoGpu(why.to_string()));
            Vec::new()
        }
    };
    match probe::nvrtc() {
        Ok(n) => {
            let path = n.path.map_or("(file not known)".into(), |p| p.display().to_string());
            r.lines.push(("nvrtc:", format!("CUDA {}.{} at {path}", n.version.0, n.version.1)));
        }
        Err(why) => {
            r.lines.push(("nvrtc:", format!("not found: {why}")));
            r.fail(GpuProblem::Unusable(format!("the env kernel cannot be compiled: {why}")));
        }
    }
    if !nvml(&mut r) && !devices.is_empty() {
        r.fail(GpuProblem::Unusable("NVML cannot be read: no GPU busy % or memory figures".into()));
    }
    let torch = crate::runtime_libs::load_torch_cuda();
    r.lines.push((
        "libtorch cuda:",
        if torch { format!("{} device(s)", tch::Cuda::device_count()) } else { "not available".into() },
    ));
    if !devices.is_empty() && !torch {
        r.fail(GpuProblem::Unusable(
            crate::training::device::cuda_unusable(0).unwrap_or_else(|| "libtorch cannot use CUDA".into()),
        ));
    }
    if let Some(first) = devices.first() {
        let started = std::time::Instant::now();
        match crate::env::kernel::cuda::CudaKernel::load(first.ordinal) {
            Ok(_) => r.lines.push((
                "env kernel:",
                format!("compiled and loaded on cuda:{} in {:.2} s", first.ordinal, started.elapsed().as_secs_f64()),
            )),
            Err(e) => {
                r.lines.push(("env kernel:", format!("failed on cuda:{}: {e}", first.ordinal)));
                r.fail(GpuProblem::Unusable(format!("the env kernel cannot run on cuda:{}: {e}", first.ordinal)));
            }
        }
    }
    r
}

/// NVML's view: the driver's version, each GPU's name and memory (busy % and memory figures come from it).
/// Whether NVML answered.
#[cfg(feature = "train")]
fn nvml(r: &mut GpuReport) -> bool {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            r.lines.push(("nvml:", format!("not available: {e} (the NVIDIA driver's libnvidia-ml)")));
            return false;
        }
    };
    let driver = nvml.sys_driver_version().unwrap_or_else(|e| format!("unknown ({e})"));
    let count = nvml.device_count().unwrap_or(0);
    r.lines.push(("nvml:", format!("driver {driver}, {count} GPU(s)")));
    for i in 0..count {
        let line = match nvml.device_by_index(i) {
            Ok(d) => {
                let name = d.name().unwrap_or_else(|_| "(unnamed)".into());
                let mem = d.memory_info().map_or("memory unknown".into(), |m| {
                    format!("{} / {} MiB used", m.used / (1024 * 1024), m.total / (1024 * 1024))
                });
                let bus = d.pci_info().map(|p| p.bus_id).unwrap_or_default();
                format!("GPU {i} {name} ({bus}), {mem}")
            }
            Err(e) => format!("GPU {i}: {e}"),
        };
        r.lines.push(("nvml gpu:", line));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_read_as_make_gpu_check_expects() {
        assert_eq!(GpuProblem::NoGpu("no NVIDIA driver".into()).to_string(), "no GPU: no NVIDIA driver");
        assert_eq!(GpuProblem::Unusable("x".into()).to_string(), "GPU not usable: x");
        let mut r = GpuReport { lines: Vec::new(), problem: None };
        r.fail(GpuProblem::NoGpu("first".into()));
        r.fail(GpuProblem::Unusable("second".into()));
        assert_eq!(r.problem, Some(GpuProblem::NoGpu("first".into())), "the first problem is the reason");
    }
}
