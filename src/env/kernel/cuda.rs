//! The kernel's CUDA build: [`super::SOURCE`] compiled at run time by NVRTC (`super::nvrtc`) with FMA
//! contraction off (`--fmad=false`), so that on the GPU it computes what the CPU build and `VecEnv`
//! compute, operation by operation. NVRTC needs no GPU: CI compiles the kernel here and checks its entry
//! points, so a source change that breaks the CUDA build fails without one.
//!
//! On a device the source is built as a CUBIN for the device's own compute capability (no driver JIT, no
//! PTX the driver may be too old for) and loaded once per process and device (`module_cache`): every env
//! and trainer of a search shares the module and the device's context. [`CudaKernel`] launches the
//! compiled kernel (one thread per env) on the device's legacy default stream, libtorch's current stream
//! by default, for [`super::TensorKernelEnv`], which keeps the env's state in tch tensors: the policy
//! reads the observations (`obs()`), its actions are copied into the env's own buffer on the device
//! (`set_actions`), and nothing comes back to the host inside a step.

pub use super::error::KernelEnvError;
use super::module_cache::{LoadOnce, ModuleKey, module_key};
use super::nvrtc;
use super::{Buffers, Entry, Params};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// The kernel's entry points (`TB_KERNEL` in `env_step.c`).
pub const ENTRY_POINTS: [&str; 2] = ["tb_env_init", "tb_env_step"];

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

/// A source's module on one device, with the device's context.
#[derive(Clone)]
struct Loaded {
    ctx: Arc<CudaContext>,
    module: Arc<CudaModule>,
}

/// The modules loaded in this process, by (device, source).
static MODULES: LoadOnce<ModuleKey, Loaded> = LoadOnce::new();
/// The CUDA contexts (the devices' primary contexts, libtorch's too), by ordinal.
static CONTEXTS: LoadOnce<usize, Arc<CudaContext>> = LoadOnce::new();

/// CUDA device `ordinal`'s context, shared by everything this process runs on it.
pub fn context(ordinal: usize) -> Result<Arc<CudaContext>, KernelEnvError> {
    // SAFETY: only tries dlopen on candidate names and closes what it opened.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(KernelEnvError::NoDriver);
    }
    CONTEXTS.get_or_load(ordinal, || CudaContext::new(ordinal).map_err(driver))
}

/// Builds `source` for device `ordinal`'s compute capability (a CUBIN, checked against the driver's CUDA
/// version) and loads it there.
fn load_module(ordinal: usize, source: &str, name: &str) -> Result<Loaded, KernelEnvError> {
    let ctx = context(ordinal)?;
    let cc = ctx.compute_capability().map_err(driver)?;
    let version = nvrtc::driver_version().ok_or(KernelEnvError::NoDriver)?;
    let cubin = cubin_for(source, name, version, cc)?;
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())).map_err(driver)?;
    log::debug!("CUDA: {name} built for sm_{}{} and loaded on device {ordinal}", cc.0, cc.1);
    Ok(Loaded { ctx, module })
}

impl CudaProgram {
    /// Loads `entries` of `source` (named `name` in NVRTC's messages) on CUDA device `ordinal`: compiled
    /// and loaded by the first request of the process for that device and source, shared after.
    pub fn load(ordinal: usize, source: &str, name: &str, entries: &[&str]) -> Result<Self, KernelEnvError> {
        let loaded = MODULES.get_or_load(module_key(ordinal, name, source), || load_module(ordinal, source, name))?;
        let functions =
            entries.iter().map(|e| loaded.module.load_function(e).map_err(driver)).collect::<Result<_, _>>()?;
        Ok(CudaProgram { _module: loaded.module.clone(), functions, stream: loaded.ctx.default_stream() })
    }

    /// Entry point `i` of those `load` was given.
    pub fn function(&self, i: usize) -> &CudaFunction {
        &self.functions[i]
    }

    /// The context's default stream, on which the kernels are launched.
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

type Cubins = LoadOnce<(String, u64, String, nvrtc::CudaVersion), Arc<[u8]>>;

/// The CUBINs built so far in this process, by (name, source hash, arch, driver's CUDA version): devices
/// of one architecture share one build.
static CUBINS: Cubins = LoadOnce::new();

/// `source` as a CUBIN for compute capability `cc` under a driver for CUDA `driver` (built once per
/// process and architecture).
fn cubin_for(
    source: &str,
    name: &str,
    driver: nvrtc::CudaVersion,
    cc: (i32, i32),
) -> Result<Arc<[u8]>, KernelEnvError> {
    let key = (name.to_string(), module_key(0, name, source).1, nvrtc::sm_arch(cc.0, cc.1), driver);
    CUBINS.get_or_load(key, || nvrtc::compile_for_device(source, name, driver, cc).map(Arc::from))
}

/// The env kernel as PTX (for reading what NVRTC generates), FMA contraction off.
pub fn compile() -> Result<cudarc::nvrtc::Ptx, KernelEnvError> {
    compile_source(super::SOURCE, "env_step.cu")
}

/// A CUDA C source as PTX (for reading what NVRTC generates; a device gets a CUBIN of its own
/// architecture), FMA contraction off.
pub fn compile_source(source: &str, name: &str) -> Result<cudarc::nvrtc::Ptx, KernelEnvError> {
    nvrtc::compile_ptx(source, name, false).map(cudarc::nvrtc::Ptx::from_src)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        use super::*;

        /// On a GPU, the env kernel's module is built for the device's own architecture and loaded once: a
        /// second program of the same source on the same device shares its module, stream and context.
        #[test]
        fn on_a_gpu_a_source_is_loaded_once_per_device_as_a_cubin_of_its_arch() {
            assert!(crate::runtime_libs::load_torch_cuda(), "no CUDA device: this test needs a GPU");
            let a = CudaKernel::load(0).unwrap_or_else(|e| panic!("{e}"));
            let (modules, cubins) = (MODULES.len(), CUBINS.len());
            let b = CudaKernel::load(0).unwrap_or_else(|e| panic!("{e}"));
            assert!(Arc::ptr_eq(&a.program._module, &b.program._module), "the module was loaded twice");
            assert!(Arc::ptr_eq(a.program.stream().context(), b.program.stream().context()), "two contexts");
            assert_eq!((MODULES.len(), CUBINS.len()), (modules, cubins), "loaded or built again");
            let cc = context(0).unwrap().compute_capability().unwrap();
            let driver = nvrtc::driver_version().expect("a driver runs the GPU");
            let built = cubin_for(crate::env::kernel::SOURCE, "env_step.cu", driver, cc).unwrap();
            assert_eq!(CUBINS.len(), cubins, "the device's CUBIN was not the one built for sm_{}{}", cc.0, cc.1);
            assert_eq!(&built[..4], b"\x7fELF");
        }

        /// The CUDA build against the CPU build, bit for bit, over random actions on the shipped data with
        /// stops, cooldowns, turbulence and every accounting option (the CPU build is itself checked against
        /// `VecEnv`); with target weights or a log-return reward, within 1e-9 (f64) where CUDA's `exp`,
        /// `log` and `pow` enter. Needs a GPU: `make test-gpu`.
        #[test]
        fn kernel_cuda_build_agrees_with_the_cpu_build_bit_for_bit() {
            assert!(crate::runtime_libs::load_torch_cuda(), "no CUDA device: this test needs a GPU");
            crate::env::kernel::tensor::tests::assert_agrees_with_the_host_build(tch::Device::Cuda(0), 300, 200);
        }
    }

    /// The PTX functions of `ptx` (entries and device functions, definitions and declarations), each as
    /// (its header line, its text up to the next function).
    fn ptx_functions(ptx: &str) -> Vec<(&str, String)> {
        let mut out: Vec<(&str, String)> = Vec::new();
        for line in ptx.lines() {
            let t = line.trim_start();
            let t = t.strip_prefix(".visible ").or_else(|| t.strip_prefix(".weak ")).unwrap_or(t);
            if t.starts_with(".entry ") || t.starts_with(".func ") {
                out.push((line, String::new()));
            } else if let Some((_, body)) = out.last_mut() {
                body.push_str(line);
                body.push('\n');
            }
        }
        out
    }

    /// The headers of the kernel's own functions in `ptx` (the entry points and the `tb_` functions
    /// compiled out of line) with a fused multiply-add, except those named in `allowed`. CUDA's own helpers
    /// (`__internal_accurate_pow` and the like) are not the kernel's.
    fn fma_outside(ptx: &str, allowed: &[&str]) -> Vec<String> {
        ptx_functions(ptx)
            .into_iter()
            .filter(|(head, body)| {
                let ours = head.contains(".entry ") || head.contains("tb_");
                let fma = body.contains("fma.rn.f64") || body.contains("fma.rn.f32");
                ours && fma && !allowed.iter().any(|a| head.contains(a))
            })
            .map(|(head, _)| head.to_string())
            .collect()
    }

    /// The same source the CPU build runs compiles for CUDA (no GPU needed), with each entry point
    /// exported unmangled and no fused multiply-add in the kernel's own arithmetic: only CUDA's `exp`,
    /// `log` and `pow`, kept out of line as `tb_exp`, `tb_log` and `tb_pow`, and CUDA's helpers they call
    /// have them (by design).
    #[test]
    fn the_kernel_source_compiles_for_cuda_with_nvrtc() {
        let ptx = compile().unwrap_or_else(|e| panic!("{e}")).to_src();
        for entry in ENTRY_POINTS {
            assert!(ptx.contains(&format!(".entry {entry}(")), "no entry point {entry} in the PTX");
        }
        let math = ["tb_exp", "tb_log", "tb_pow"];
        for f in math {
            let out_of_line = ptx_functions(&ptx).iter().any(|(head, body)| head.contains(f) && body.contains('{'));
            assert!(out_of_line, "{f} is not a function of its own in the PTX: the check below would miss it");
        }
        assert_eq!(fma_outside(&ptx, &math), Vec::<String>::new(), "FMA contraction is on in these");
        // With contraction allowed, NVRTC does fuse some of the kernel's own multiply-adds: the option matters.
        let ptx = nvrtc::compile_ptx(super::super::SOURCE, "env_step.cu", true).unwrap();
        assert!(!fma_outside(&ptx, &math).is_empty(), "the kernel has no multiply-add to contract");
    }

    /// A device gets machine code of its own architecture: an ELF for the CUDA machine (EM_CUDA, 190) with
    /// every entry point, built for an A100 (sm_80) and an H100 (sm_90) alike, no PTX for the driver to JIT.
    #[test]
    fn the_kernel_builds_as_a_cubin_for_the_devices_architecture() {
        for cc in [(8, 0), (9, 0)] {
            let cubin = cubin_for(super::super::SOURCE, "env_step.cu", nvrtc::CudaVersion(13, 0), cc)
                .unwrap_or_else(|e| panic!("sm_{}{}: {e}", cc.0, cc.1));
            assert_eq!(&cubin[..4], b"\x7fELF", "not an ELF");
            assert_eq!(u16::from_le_bytes([cubin[18], cubin[19]]), 190, "not a CUDA ELF");
            for entry in ENTRY_POINTS {
                assert!(cubin.windows(entry.len()).any(|w| w == entry.as_bytes()), "no {entry} in the CUBIN");
            }
            assert!(!cubin.windows(7).any(|w| w == b".entry "), "PTX in the CUBIN: the driver would JIT it");
            // One build per architecture and process: the next env on this architecture gets the same.
            let again = cubin_for(super::super::SOURCE, "env_step.cu", nvrtc::CudaVersion(13, 0), cc).unwrap();
            assert!(Arc::ptr_eq(&cubin, &again), "built twice");
        }
        let sm80 = cubin_for(super::super::SOURCE, "env_step.cu", nvrtc::CudaVersion(13, 0), (8, 0)).unwrap();
        let sm90 = cubin_for(super::super::SOURCE, "env_step.cu", nvrtc::CudaVersion(13, 0), (9, 0)).unwrap();
        assert_ne!(sm80, sm90, "the architecture made no difference");
    }

    /// What cannot run on the device in hand is refused before a load, naming the versions and the fix.
    #[test]
    fn a_build_the_device_could_not_run_is_refused_with_the_versions() {
        let (nvrtc_version, _) = nvrtc::loaded().unwrap_or_else(|e| panic!("{e}"));
        let old = nvrtc::CudaVersion(nvrtc_version.0 - 1, 8);
        let err = cubin_for(super::super::SOURCE, "env_step.cu", old, (8, 6)).unwrap_err().to_string();
        assert!(
            err.contains(&format!("NVRTC is CUDA {nvrtc_version}")) && err.contains(&format!("CUDA {old}")),
            "{err}"
        );
        assert!(err.contains("install an NVIDIA driver"), "{err}");
        let err = cubin_for(super::super::SOURCE, "env_step.cu", nvrtc_version, (2, 0)).unwrap_err().to_string();
        assert!(err.contains("compute capability 2.0, sm_20"), "{err}");
    }
}
