//! Why the env kernel cannot be built, loaded or launched: one error for the CUDA build (`cuda`), NVRTC
//! (`nvrtc`) and the launches' checks (`buffer`, `tensor`).

use crate::env::EnvError;

/// Why the env kernel cannot be built, loaded or launched; each message names the fix where there is one.
#[derive(Debug, thiserror::Error)]
pub enum KernelEnvError {
    /// No NVRTC library could be loaded (where it looked, and why each failed).
    #[error(
        "NVRTC (libnvrtc) is not available: looked in the system's library path and in {0}; install the project's venv (`make venv`: torch's CUDA wheel brings it) or a CUDA toolkit"
    )]
    NoNvrtc(String),
    /// NVRTC refused the kernel's source, or did not hand over what it built.
    #[error("NVRTC could not compile a kernel: {0}")]
    Compile(#[from] CompileError),
    /// The NVRTC found cannot build for this GPU or driver (too new or too old for it).
    #[error("the kernel cannot be built for this GPU: {0}")]
    Unbuildable(String),
    /// No CUDA driver: no NVIDIA GPU, or its driver is not installed.
    #[error("the CUDA driver (libcuda) is not available: the kernel env needs an NVIDIA GPU and its driver")]
    NoDriver,
    /// A device other than the CPU or CUDA was asked for (its name).
    #[error("the kernel env runs on the CPU or a CUDA device, not on {0}: use --device cpu or cuda")]
    Device(String),
    /// The CUDA driver failed (loading the module, a launch, a copy).
    #[error("CUDA: {0}")]
    Driver(String),
    /// A state buffer does not match what a launch needs (kind, contiguity, size or device).
    #[error("the kernel's buffer `{name}` is {got}; the launch needs {want}: refused before the launch")]
    Buffer {
        /// The buffer's name in `env_step.c` (`cash`, `holding`, ...).
        name: &'static str,
        /// What it is (kind, element count, device).
        got: String,
        /// What the launch needs.
        want: String,
    },
    /// A size does not fit the kernel's integers, or the env's layout is corrupt.
    #[error("{0}")]
    TooLarge(String),
    /// Tensors handed to a launch whose shapes do not agree (a caller's bug, named with the shapes).
    #[error("{what} tensors of shapes {shapes}")]
    Shapes {
        /// What the tensors are for.
        what: &'static str,
        /// Their shapes, as given.
        shapes: String,
    },
    /// A read-back from the device with another count of values than asked for.
    #[error("the {what} came back as {got} values, not {want}")]
    Readback {
        /// What was read back.
        what: &'static str,
        /// Values that came back.
        got: usize,
        /// Values asked for.
        want: usize,
    },
    /// The settings or the panel were refused (`EnvError`).
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A tensor operation failed in libtorch.
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

/// Why NVRTC did not turn a kernel's source (named) into a CUBIN or PTX.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The source, its name or an option holds a NUL byte (`what`: which), which C strings cannot carry.
    #[error("{name}: {what} holds a NUL byte")]
    Nul {
        /// The kernel's name.
        name: String,
        /// "the source", "the name" or "an NVRTC option".
        what: &'static str,
    },
    /// `nvrtcCreateProgram` failed (its status).
    #[error("{name}: nvrtcCreateProgram failed (status {status})")]
    Create {
        /// The kernel's name.
        name: String,
        /// NVRTC's status code.
        status: i32,
    },
    /// NVRTC refused the source: its status and its log (the compiler's messages).
    #[error("{name} (status {status}): {log}")]
    Refused {
        /// The kernel's name.
        name: String,
        /// NVRTC's status code.
        status: i32,
        /// The program's log.
        log: String,
    },
    /// The compiled program has no output of the kind asked for (`CUBIN` or `PTX`).
    #[error("{name}: NVRTC produced no {kind}")]
    NoOutput {
        /// The kernel's name.
        name: String,
        /// `CUBIN` or `PTX`.
        kind: &'static str,
    },
    /// NVRTC did not copy its output out.
    #[error("{name}: NVRTC did not hand over its output")]
    NoHandover {
        /// The kernel's name.
        name: String,
    },
}
