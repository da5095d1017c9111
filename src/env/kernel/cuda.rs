//! The kernel's CUDA build: [`super::SOURCE`] compiled at run time by NVRTC (the `cudarc` crate, loaded
//! dynamically) with FMA contraction off (`--fmad=false`), so that on the GPU it computes what the CPU
//! build and `VecEnv` compute, operation by operation. NVRTC needs no GPU: CI compiles the kernel here and
//! checks its entry points, so a source change that breaks the CUDA build fails without one.
//!
//! `libnvrtc` comes with the PyPI torch wheel's `nvidia` packages the project installs (the venv of
//! `crate::native::pyenv_dir`); it is loaded from there (with its builtins) unless the system's loader
//! finds one. [`CudaKernel`] launches the compiled kernel (one thread per env) on the device's legacy
//! default stream, libtorch's current stream by default, for [`super::TensorKernelEnv`], which keeps the
//! env's state in tch tensors: the policy reads the observations and writes the actions in place, and
//! nothing comes back to the host inside a step.

use super::{Buffers, Entry, Params};
use crate::env::EnvError;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The kernel's entry points (`TB_KERNEL` in `env_step.c`).
pub const ENTRY_POINTS: [&str; 3] = ["tb_env_init", "tb_env_step", "tb_env_observe"];

#[derive(Debug, thiserror::Error)]
pub enum KernelEnvError {
    #[error(
        "NVRTC (libnvrtc) is not available: looked in the system's library path and in {0}; install the project's venv (`make venv`: torch's CUDA wheel brings it) or a CUDA toolkit"
    )]
    NoNvrtc(String),
    #[error("NVRTC could not compile a kernel: {0}")]
    Compile(String),
    #[error("the CUDA driver (libcuda) is not available: the kernel env needs an NVIDIA GPU and its driver")]
    NoDriver,
    #[error("the kernel env runs on the CPU or a CUDA device, not on {0}: use --device cpu or cuda")]
    Device(String),
    #[error("CUDA: {0}")]
    Driver(String),
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

fn driver<E: std::fmt::Display>(e: E) -> KernelEnvError {
    KernelEnvError::Driver(e.to_string())
}

// SAFETY: `Params` is `#[repr(C)]` plain data mirroring `tb_params` (checked by
// `params_and_buffers_mirror_the_c_structs`), passed by value as the kernel's first argument.
unsafe impl cudarc::driver::DeviceRepr for Params {}
// SAFETY: `Buffers` is `#[repr(C)]` pointers mirroring `tb_buffers`; `TensorKernelEnv` fills it with device
// pointers of tensors it keeps alive.
unsafe impl cudarc::driver::DeviceRepr for Buffers {}

/// Threads per block of the kernel's launches.
pub const BLOCK: u32 = 128;

/// The launch grid for `n_envs` envs: one thread each, in blocks of [`BLOCK`].
pub fn launch_config(n_envs: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n_envs as u32).div_ceil(BLOCK).max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A CUDA C source compiled by NVRTC (FMA contraction off) and loaded on one device, its entry points
/// launched on the device's legacy default stream (libtorch's current stream unless a caller changed it).
pub struct CudaProgram {
    _module: Arc<CudaModule>,
    functions: Vec<CudaFunction>,
    stream: Arc<CudaStream>,
}

impl CudaProgram {
    /// Compiles `source` (named `name` in NVRTC's messages) and loads `entries` on CUDA device `ordinal`.
    pub fn load(ordinal: usize, source: &str, name: &str, entries: &[&str]) -> Result<Self, KernelEnvError> {
        let ptx = compile_source(source, name)?;
        // SAFETY: only tries dlopen on candidate names and closes what it opened.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(KernelEnvError::NoDriver);
        }
        let ctx = CudaContext::new(ordinal).map_err(driver)?;
        let module = ctx.load_module(ptx).map_err(driver)?;
        let functions = entries.iter().map(|e| module.load_function(e).map_err(driver)).collect::<Result<_, _>>()?;
        Ok(CudaProgram { _module: module, functions, stream: ctx.default_stream() })
    }

    /// Entry point `i` of those `load` was given.
    pub fn function(&self, i: usize) -> &CudaFunction {
        &self.functions[i]
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

/// The env kernel loaded on one CUDA device.
pub struct CudaKernel {
    program: CudaProgram,
}

impl CudaKernel {
    /// Compiles the kernel (NVRTC) and loads it on CUDA device `ordinal`.
    pub fn load(ordinal: usize) -> Result<Self, KernelEnvError> {
        Ok(CudaKernel {
            program: CudaProgram::load(ordinal, super::SOURCE, "env_step.cu", &["tb_env_init", "tb_env_step"])?,
        })
    }

    /// Launches `entry` over `p.n_envs` envs; returns once queued (no synchronisation).
    ///
    /// # Safety
    /// Every pointer in `b` must be device memory of the size `p` promises, alive until the launch has run.
    pub(crate) unsafe fn launch(&self, entry: Entry, p: &Params, b: &Buffers) -> Result<(), KernelEnvError> {
        let f = self.program.function(match entry {
            Entry::Init => 0,
            Entry::Step => 1,
        });
        let mut args = self.program.stream().launch_builder(f);
        args.arg(p).arg(b);
        // SAFETY: the kernel takes (tb_params, tb_buffers) by value, mirrored by `Params` and `Buffers`; the
        // caller's promise on the pointers; the grid covers `n_envs` threads and the kernel guards `i < n_envs`.
        unsafe { args.launch(launch_config(p.n_envs.max(0) as usize)) }.map_err(driver)?;
        Ok(())
    }
}

/// The `site-packages` folders of a venv (`lib/python3*/site-packages`).
fn venv_site_packages(venv: &Path) -> Vec<PathBuf> {
    let Ok(pys) = std::fs::read_dir(venv.join("lib")) else { return Vec::new() };
    pys.flatten().map(|py| py.path().join("site-packages")).collect()
}

/// The `site-packages` holding the libtorch this process loaded (`.../site-packages/torch/lib/libtorch_cpu.so`
/// in `/proc/self/maps`): on a machine whose PyTorch is not the project's venv (a GPU machine carrying
/// only the binary), NVRTC comes with that PyTorch's `nvidia` packages.
fn loaded_torch_site_packages() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    site_packages_in_maps(&maps)
}

fn site_packages_in_maps(maps: &str) -> Option<PathBuf> {
    let lib = maps.lines().find_map(|l| l.split_whitespace().last().filter(|p| p.ends_with("/libtorch_cpu.so")))?;
    // .../site-packages/torch/lib/libtorch_cpu.so
    Path::new(lib).parent()?.parent()?.parent().map(Path::to_path_buf)
}

/// `libnvrtc*.so*` and `libnvrtc-builtins*.so*` in `site-packages/nvidia/*/lib` of each folder, builtins first.
fn nvrtc_libs(site_packages: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for site in site_packages {
        let Ok(pkgs) = std::fs::read_dir(site.join("nvidia")) else { continue };
        for pkg in pkgs.flatten() {
            let Ok(files) = std::fs::read_dir(pkg.path().join("lib")) else { continue };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                if name.starts_with("libnvrtc") && name.contains(".so") && !name.contains(".alt.") {
                    found.push(f.path());
                }
            }
        }
    }
    // Builtins before the compiler that loads them; newest CUDA last so it is the one found by name.
    found.sort_by_key(|p| (!p.to_string_lossy().contains("builtins"), p.clone()));
    found.dedup();
    found
}

fn dlopen_global(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: dlopen with a valid NUL-terminated path; the handle is deliberately kept open for the life
    // of the process (NVRTC is then found by its soname).
    !unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null()
}

/// Makes NVRTC loadable (once per process): the system's, else the venv's.
pub fn nvrtc() -> Result<(), KernelEnvError> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            // SAFETY: only tries dlopen on candidate names and closes what it opened.
            if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                return Ok(());
            }
            let venv = crate::native::pyenv_dir();
            let mut sites = venv_site_packages(&venv);
            sites.extend(loaded_torch_site_packages());
            for lib in nvrtc_libs(&sites) {
                if !dlopen_global(&lib) {
                    log::debug!("NVRTC: cannot load {}", lib.display());
                }
            }
            // SAFETY: as above.
            if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                Ok(())
            } else {
                let mut looked: Vec<String> = sites.iter().map(|s| format!("{}/nvidia/*/lib", s.display())).collect();
                if looked.is_empty() {
                    looked.push(format!("{}/lib/python3*/site-packages/nvidia/*/lib", venv.display()));
                }
                Err(looked.join(", "))
            }
        })
        .clone()
        .map_err(KernelEnvError::NoNvrtc)
}

type Compiled = std::sync::Mutex<std::collections::HashMap<(String, String), cudarc::nvrtc::Ptx>>;

/// The sources compiled so far in this process, by (name, source).
fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(Default::default)
}

/// The env kernel as PTX, compiled by NVRTC with FMA contraction off.
pub fn compile() -> Result<cudarc::nvrtc::Ptx, KernelEnvError> {
    compile_source(super::SOURCE, "env_step.cu")
}

/// A CUDA C source as PTX, compiled by NVRTC with FMA contraction off.
///
/// Compiled once per process for a given name and source: a search builds an env per trial (64 for a GPU
/// population), and each NVRTC compile takes a noticeable fraction of a second.
pub fn compile_source(source: &str, name: &str) -> Result<cudarc::nvrtc::Ptx, KernelEnvError> {
    let cache = compiled();
    let key = (name.to_string(), source.to_string());
    if let Some(ptx) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(ptx.clone());
    }
    nvrtc()?;
    let opts = cudarc::nvrtc::CompileOptions { fmad: Some(false), name: Some(name.into()), ..Default::default() };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts)
        .map_err(|e| KernelEnvError::Compile(format!("{name}: {e}")))?;
    cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, ptx.clone());
    Ok(ptx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU machine's own PyTorch: NVRTC is looked for beside the libtorch the process loaded.
    #[test]
    fn nvrtc_is_found_beside_the_loaded_libtorch() {
        let maps = "7f00-7f01 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                    7f02-7f03 r-xp 00000000 08:01 43 /opt/py/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so\n";
        assert_eq!(site_packages_in_maps(maps), Some(PathBuf::from("/opt/py/lib/python3.12/site-packages")));
        assert_eq!(site_packages_in_maps("7f00-7f01 r-xp 0 0 0 /lib/libc.so.6\n"), None);
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("nvidia/cu13/lib");
        std::fs::create_dir_all(&lib).unwrap();
        for f in ["libnvrtc.so.13", "libnvrtc-builtins.so.13.0", "libcublas.so.13", "libnvrtc.alt.so.13"] {
            std::fs::write(lib.join(f), b"").unwrap();
        }
        let got = nvrtc_libs(&[dir.path().to_path_buf(), dir.path().to_path_buf()]);
        assert_eq!(got, vec![lib.join("libnvrtc-builtins.so.13.0"), lib.join("libnvrtc.so.13")]);
        // This very process loaded the venv's libtorch: its site-packages is found the same way.
        let _ = tch::Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
        let here = loaded_torch_site_packages().expect("libtorch_cpu.so is mapped in the test process");
        assert!(here.join("torch").is_dir(), "{}", here.display());
    }

    #[test]
    fn the_grid_covers_every_env_once() {
        for (e, blocks) in [(1, 1), (128, 1), (129, 2), (4096, 32), (16_385, 129)] {
            let c = launch_config(e);
            assert_eq!((c.grid_dim.0, c.block_dim.0), (blocks, BLOCK), "{e} envs");
            assert!((c.grid_dim.0 * c.block_dim.0) as usize >= e);
        }
    }

    /// Needs a CUDA GPU (feature `gpu-tests`, `make test-gpu`): fails without one.
    #[cfg(feature = "gpu-tests")]
    mod gpu_tests {
        /// The CUDA build against the CPU build, bit for bit, over random actions on the shipped data with
        /// stops, cooldowns, turbulence and every accounting option (the CPU build is itself checked against
        /// `VecEnv`). Needs a GPU: `make test-gpu`.
        #[test]
        fn kernel_cuda_build_agrees_with_the_cpu_build_bit_for_bit() {
            assert!(crate::native::load_torch_cuda(), "no CUDA device: this test needs a GPU");
            crate::env::kernel::tensor::tests::assert_agrees_with_the_host_build(tch::Device::Cuda(0), 300, 200);
        }
    }

    /// The same source the CPU build runs compiles for CUDA (no GPU needed), with each entry point
    /// exported unmangled and no fused multiply-add in the PTX.
    #[test]
    fn the_kernel_source_compiles_for_cuda_with_nvrtc() {
        let ptx = compile().unwrap_or_else(|e| panic!("{e}")).to_src();
        for entry in ENTRY_POINTS {
            assert!(ptx.contains(&format!(".entry {entry}(")), "no entry point {entry} in the PTX");
        }
        assert!(!ptx.contains("fma.rn.f64") && !ptx.contains("fma.rn.f32"), "FMA contraction is on");
        // With contraction allowed, NVRTC does fuse some of the kernel's multiply-adds: the option matters.
        let fused = cudarc::nvrtc::CompileOptions { fmad: Some(true), ..Default::default() };
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(super::super::SOURCE, fused).unwrap().to_src();
        assert!(ptx.contains("fma.rn.f64"), "the kernel has no multiply-add to contract");
    }

    /// A source is compiled once per process: the next env of a search takes the PTX from the cache.
    #[test]
    fn a_source_is_compiled_once_per_process() {
        let source = "extern \"C\" __global__ void tb_cache_probe(float *x) { x[0] = 1.0f; }";
        let key = ("cache_probe.cu".to_string(), source.to_string());
        let first = compile_source(source, "cache_probe.cu").unwrap_or_else(|e| panic!("{e}"));
        let held = compiled().lock().unwrap().get(&key).map(|p| p.to_src());
        assert_eq!(held.as_deref(), Some(first.to_src().as_str()), "the PTX was not kept");
        // What the cache holds is what comes back: a marked entry stands in for the compile.
        let marked = cudarc::nvrtc::Ptx::from_src(format!("{}\n// cached", first.to_src()));
        compiled().lock().unwrap().insert(key, marked);
        let second = compile_source(source, "cache_probe.cu").unwrap_or_else(|e| panic!("{e}"));
        assert!(second.to_src().ends_with("// cached"), "compiled again instead of taken from the cache");
    }
}
