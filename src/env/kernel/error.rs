//! Why the env kernel cannot be built, loaded or launched: one error for the CUDA build (`cuda`), NVRTC
//! (`nvrtc`) and the launches' checks (`buffer`, `tensor`).

use crate::env::EnvError;

#[derive(Debug, thiserror::Error)]
pub enum KernelEnvError {
    #[error(
        "NVRTC (libnvrtc) is not available: looked in the system's library path and in {0}; install the project's venv (`make venv`: torch's CUDA wheel brings it) or a CUDA toolkit"
    )]
    NoNvrtc(String),
    #[error("NVRTC could not compile a kernel: {0}")]
    Compile(String),
    #[error("the kernel cannot be built for this GPU: {0}")]
    Unbuildable(String),
    #[error("the CUDA driver (libcuda) is not available: the kernel env needs an NVIDIA GPU and its driver")]
    NoDriver,
    #[error("the kernel env runs on the CPU or a CUDA device, not on {0}: use --device cpu or cuda")]
    Device(String),
    #[error("CUDA: {0}")]
    Driver(String),
    #[error("the kernel's buffer `{name}` is {got}; the launch needs {want}: refused before the launch")]
    Buffer { name: &'static str, got: String, want: String },
    #[error("{0}")]
    TooLarge(String),
    /// Tensors handed to a launch whose shapes do not agree (a caller's bug, named with the shapes).
    #[error("{what} tensors of shapes {shapes}")]
    Shapes { what: &'static str, shapes: String },
    /// A read-back from the device with another count of values than asked for.
    #[error("the {what} came back as {got} values, not {want}")]
    Readback { what: &'static str, got: usize, want: usize },
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

impl KernelEnvError {
    /// The kernel refuses `d` (neither the CPU nor CUDA).
    pub fn device(d: tch::Device) -> Self {
        KernelEnvError::Device(match d {
            tch::Device::Cpu => "the CPU".into(),
            tch::Device::Cuda(i) => format!("cuda:{i}"),
            tch::Device::Mps => "mps".into(),
            tch::Device::Vulkan => "vulkan".into(),
        })
    }
}
