//! `tradebot doctor`: loads each native library for real and says where it came from. It needs no
//! config: without one (none named, none found) the libraries are looked for where they would be by
//! default.

use crate::config::Config;
use crate::out::outln;
use anyhow::Context;
use std::process::ExitCode;

pub fn run(config: Option<Config>) -> anyhow::Result<ExitCode> {
    let venv = crate::native::pyenv_dir();
    match &config {
        Some(_) => outln!("config:        found")?,
        None => outln!("config:        none found (the defaults are checked)")?,
    }
    outln!("python venv:   {}", venv.display())?;
    let lib = config.as_ref().and_then(|c| c.runtime.onnxruntime_lib.as_deref());
    let ort = crate::native::init_onnxruntime(lib).context("loading ONNX Runtime")?;
    outln!("onnxruntime:   {}", ort.path.display())?;
    #[cfg(feature = "train")]
    {
        let cuda = crate::native::load_torch_cuda();
        let t = tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0]).sum(tch::Kind::Float);
        outln!("libtorch:      ok (sum [1,2,3] = {})", t.double_value(&[]))?;
        outln!(
            "cuda:          {}",
            if cuda { format!("{} device(s)", tch::Cuda::device_count()) } else { "not available".into() }
        )?;
    }
    #[cfg(not(feature = "train"))]
    outln!("libtorch:      not linked (built without the `train` feature)")?;
    Ok(ExitCode::SUCCESS)
}
