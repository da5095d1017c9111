//! `tradebot doctor`: loads each native library for real and says where it came from, then the GPU
//! (`doctor_gpu`: driver, devices and compute capability, NVRTC, NVML, the env kernel). It needs no config:
//! without one (none named, none found) the libraries are looked for where they would be by default.
//! `--gpu` requires a usable GPU: without one it ends with "no GPU: <reason>" and exit status 1.

use super::doctor_gpu;
use crate::config::Config;
use crate::out::outln;
use anyhow::Context;
use std::process::ExitCode;

pub(super) fn run(config: Option<Config>, gpu: bool) -> anyhow::Result<ExitCode> {
    let venv = crate::runtime_libs::pyenv_dir();
    match &config {
        Some(c) => outln!("config:        {}", c.source.display())?,
        None => outln!("config:        none found (the defaults are checked)")?,
    }
    outln!("python venv:   {}", venv.display())?;
    let lib = config.as_ref().and_then(|c| c.runtime.onnxruntime_lib.as_deref());
    let ort = crate::runtime_libs::init_onnxruntime(lib).context("loading ONNX Runtime")?;
    outln!("onnxruntime:   {}", ort.path.display())?;
    #[cfg(feature = "train")]
    {
        let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]).sum(tch::Kind::Float);
        outln!(
            "libtorch:      ok (sum [1,2,3] = {})",
            f64::try_from(t.to_kind(tch::Kind::Double)).unwrap_or(f64::NAN)
        )?;
    }
    #[cfg(not(feature = "train"))]
    outln!("libtorch:      not linked (built without the `train` feature)")?;
    let report = doctor_gpu::check();
    for (label, text) in &report.lines {
        outln!("{label:<15}{text}")?;
    }
    match report.problem {
        Some(p) if gpu => {
            eprintln!("{p}");
            Ok(ExitCode::from(1))
        }
        Some(p) => {
            outln!("gpu:           {p} (training runs on the CPU; `--device cuda` is refused)")?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            outln!("gpu:           ok")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
