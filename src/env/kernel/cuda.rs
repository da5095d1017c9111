//! The kernel's CUDA build: [`super::SOURCE`] compiled at run time by NVRTC (the `cudarc` crate, loaded
//! dynamically) with FMA contraction off (`--fmad=false`), so that on the GPU it computes what the CPU
//! build and `VecEnv` compute, operation by operation. NVRTC needs no GPU: CI compiles the kernel here and
//! checks its entry points, so a source change that breaks the CUDA build fails without one.
//!
//! `libnvrtc` comes with the PyPI torch wheel's `nvidia` packages the project installs (the venv of
//! `crate::native::pyenv_dir`); it is loaded from there (with its builtins) unless the system's loader
//! finds one. [`CudaKernelEnv`] runs the compiled kernel on the raw pointers of tch tensors on the device
//! (one thread per env, positions asset-major so that neighbouring threads read neighbouring memory), on
//! the legacy default stream that libtorch's current stream is by default: the policy reads the
//! observations and writes the actions in place, and nothing comes back to the host inside a step.

use super::{Buffers, Panel, Params};
use crate::env::{EnvConfig, EnvError, Step};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tch::{Device, Kind, Tensor};

/// The kernel's entry points (`TB_KERNEL` in `env_step.c`).
pub const ENTRY_POINTS: [&str; 3] = ["tb_env_init", "tb_env_step", "tb_env_observe"];

#[derive(Debug, thiserror::Error)]
pub enum CudaKernelError {
    #[error(
        "NVRTC (libnvrtc) is not available: looked in the system's library path and in {0}; install the project's venv (`make venv`: torch's CUDA wheel brings it) or a CUDA toolkit"
    )]
    NoNvrtc(String),
    #[error("NVRTC could not compile the environment kernel: {0}")]
    Compile(String),
    #[error("the CUDA driver (libcuda) is not available: the kernel env needs an NVIDIA GPU and its driver")]
    NoDriver,
    #[error("the kernel env runs on a CUDA device only; elsewhere use the kernel's CPU build (CpuKernelEnv)")]
    NotCuda,
    #[error("CUDA: {0}")]
    Driver(String),
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

fn driver<E: std::fmt::Display>(e: E) -> CudaKernelError {
    CudaKernelError::Driver(e.to_string())
}

// SAFETY: `Params` is `#[repr(C)]` plain data mirroring `tb_params` (checked by
// `params_and_buffers_mirror_the_c_structs`), passed by value as the kernel's first argument.
unsafe impl cudarc::driver::DeviceRepr for Params {}
// SAFETY: `Buffers` is `#[repr(C)]` pointers mirroring `tb_buffers`; `CudaKernelEnv` fills it with device
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

/// The trading environment on the GPU: `VecEnv`'s env (standard accounting), stepped by the kernel.
pub struct CudaKernelEnv {
    params: Params,
    _module: Arc<CudaModule>,
    init: CudaFunction,
    step: CudaFunction,
    stream: Arc<CudaStream>,
    /// The panel on the device (prices, features, turbulence), kept alive for the kernel's pointers.
    panel: [Tensor; 3],
    /// `[n_envs, n_assets]`: the policy writes its actions here before `step`.
    pub actions: Tensor,
    /// Per env: cash, equity, equity_out, ret_sum, ret_count (f64); day, steps (i32); draws (u64 as i64).
    cash: Tensor,
    equity: Tensor,
    equity_out: Tensor,
    ret_sum: Tensor,
    ret_count: Tensor,
    day: Tensor,
    steps: Tensor,
    draws: Tensor,
    /// Per position (asset-major): holding, entry, high water (f64), cooldown (u32 as i32).
    holding: Tensor,
    entry: Tensor,
    high_water: Tensor,
    cooldown: Tensor,
    /// Per env: the last step's reward and done flag (0/1), f32.
    pub reward: Tensor,
    pub done: Tensor,
    /// `[n_envs, obs_dim]`: the next observations, in `VecEnv::observe`'s layout.
    pub obs: Tensor,
}

impl CudaKernelEnv {
    /// The env of `cfg` on `panel`, on `device` (a CUDA device), reset to its first observations.
    pub fn new(cfg: &EnvConfig, panel: &Panel, device: Device) -> Result<Self, CudaKernelError> {
        let Device::Cuda(ordinal) = device else { return Err(CudaKernelError::NotCuda) };
        let params = super::params(cfg, panel, true)?;
        let ptx = compile()?;
        // SAFETY: only tries dlopen on candidate names and closes what it opened.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(CudaKernelError::NoDriver);
        }
        let ctx = CudaContext::new(ordinal).map_err(driver)?;
        let module = ctx.load_module(ptx).map_err(driver)?;
        let init = module.load_function("tb_env_init").map_err(driver)?;
        let step = module.load_function("tb_env_step").map_err(driver)?;
        let (e, a) = (cfg.n_envs as i64, panel.n_assets as i64);
        let zeros = |n: i64, kind: Kind| Tensor::zeros([n], (kind, device));
        let turbulence = panel.turbulence.clone().unwrap_or_else(|| vec![0.0]);
        let env = CudaKernelEnv {
            params,
            _module: module,
            init,
            step,
            stream: ctx.default_stream(),
            panel: [
                Tensor::from_slice(&panel.prices).to_device(device),
                Tensor::from_slice(&panel.features).to_device(device),
                Tensor::from_slice(&turbulence).to_device(device),
            ],
            actions: Tensor::zeros([e, a], (Kind::Float, device)),
            cash: zeros(e, Kind::Double),
            equity: zeros(e, Kind::Double),
            equity_out: zeros(e, Kind::Double),
            ret_sum: zeros(e, Kind::Double),
            ret_count: zeros(e, Kind::Double),
            day: zeros(e, Kind::Int),
            steps: zeros(e, Kind::Int),
            draws: zeros(e, Kind::Int64),
            holding: zeros(e * a, Kind::Double),
            entry: zeros(e * a, Kind::Double),
            high_water: zeros(e * a, Kind::Double),
            cooldown: zeros(e * a, Kind::Int),
            reward: zeros(e, Kind::Float),
            done: zeros(e, Kind::Float),
            obs: Tensor::zeros([e, params.obs_stride as i64], (Kind::Float, device)),
        };
        let has_turbulence = panel.turbulence.is_some();
        env.launch(&env.init.clone(), has_turbulence)?;
        Ok(env)
    }

    pub fn n_envs(&self) -> usize {
        self.params.n_envs as usize
    }

    pub fn obs_dim(&self) -> usize {
        self.params.obs_stride as usize
    }

    /// Steps every env with `self.actions` (NaN counts as 0) and writes the next observations, reward
    /// and done flags on the device. No copy to the host.
    pub fn step(&mut self) -> Result<(), CudaKernelError> {
        self.launch(&self.step.clone(), self.params.has_turbulence != 0)
    }

    /// As `VecEnv::step` on host slices (tests, benchmarks): the actions copied in, the results out.
    pub fn step_host(&mut self, actions: &[f32], out: &mut Step) -> Result<(), CudaKernelError> {
        let want = self.n_envs() * self.params.n_assets as usize;
        if actions.len() != want {
            return Err(EnvError::ActionShape { got: actions.len(), want }.into());
        }
        let host = Tensor::from_slice(actions).view([self.n_envs() as i64, self.params.n_assets as i64]);
        self.actions.copy_(&host);
        self.step()?;
        out.reward = Vec::<f32>::try_from(&self.reward)?;
        out.done = Vec::<f32>::try_from(&self.done)?.into_iter().map(|d| d != 0.0).collect();
        out.equity = Vec::<f64>::try_from(&self.equity_out)?;
        Ok(())
    }

    /// Cash per env, read back (tests).
    pub fn cash(&self) -> Result<Vec<f64>, CudaKernelError> {
        Ok(Vec::<f64>::try_from(&self.cash)?)
    }

    /// Holdings read back, env-major (`env * n_assets + asset`) like `CpuKernelEnv::holdings`.
    pub fn holdings(&self) -> Result<Vec<f64>, CudaKernelError> {
        let (e, a) = (self.n_envs() as i64, self.params.n_assets as i64);
        Ok(Vec::<f64>::try_from(self.holding.view([a, e]).transpose(0, 1).contiguous().view([-1]))?)
    }

    /// Finished episodes since the last call: (sum of total returns, count), one read per call (once per
    /// update); clears the accumulators.
    pub fn take_returns(&mut self) -> Result<(f64, f64), CudaKernelError> {
        let sum = self.ret_sum.sum(Kind::Double).double_value(&[]);
        let count = self.ret_count.sum(Kind::Double).double_value(&[]);
        let _ = self.ret_sum.zero_();
        let _ = self.ret_count.zero_();
        Ok((sum, count))
    }

    fn buffers(&self, has_turbulence: bool) -> Buffers {
        let f64p = |t: &Tensor| t.data_ptr() as *mut f64;
        Buffers {
            prices: self.panel[0].data_ptr() as *const f32,
            features: self.panel[1].data_ptr() as *const f32,
            turbulence: if has_turbulence { self.panel[2].data_ptr() as *const f64 } else { std::ptr::null() },
            actions: self.actions.data_ptr() as *const f32,
            cash: f64p(&self.cash),
            equity: f64p(&self.equity),
            day: self.day.data_ptr() as *mut i32,
            steps: self.steps.data_ptr() as *mut i32,
            draws: self.draws.data_ptr() as *mut u64,
            holding: f64p(&self.holding),
            entry: f64p(&self.entry),
            high_water: f64p(&self.high_water),
            cooldown: self.cooldown.data_ptr() as *mut u32,
            reward: self.reward.data_ptr() as *mut f32,
            done: self.done.data_ptr() as *mut f32,
            equity_out: f64p(&self.equity_out),
            obs: self.obs.data_ptr() as *mut f32,
            ret_sum: f64p(&self.ret_sum),
            ret_count: f64p(&self.ret_count),
        }
    }

    fn launch(&self, f: &CudaFunction, has_turbulence: bool) -> Result<(), CudaKernelError> {
        let (p, b) = (self.params, self.buffers(has_turbulence));
        let mut args = self.stream.launch_builder(f);
        args.arg(&p).arg(&b);
        // SAFETY: the kernel takes (tb_params, tb_buffers) by value, mirrored by `Params` and `Buffers`;
        // every pointer in `b` is a contiguous device tensor of the size `params` promises, owned by
        // `self`; the grid covers `n_envs` threads and the kernel guards `i < n_envs`.
        unsafe { args.launch(launch_config(self.n_envs())) }.map_err(driver)?;
        Ok(())
    }
}

/// `libnvrtc*.so*` and `libnvrtc-builtins*.so*` in a venv's `site-packages/nvidia/*/lib`, builtins first.
fn venv_nvrtc(venv: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(pys) = std::fs::read_dir(venv.join("lib")) else { return found };
    for py in pys.flatten() {
        let Ok(pkgs) = std::fs::read_dir(py.path().join("site-packages/nvidia")) else { continue };
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
    found
}

fn dlopen_global(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: dlopen with a valid NUL-terminated path; the handle is deliberately kept open for the life
    // of the process (NVRTC is then found by its soname).
    !unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }.is_null()
}

/// Makes NVRTC loadable (once per process): the system's, else the venv's.
pub fn nvrtc() -> Result<(), CudaKernelError> {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    READY
        .get_or_init(|| {
            // SAFETY: only tries dlopen on candidate names and closes what it opened.
            if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                return Ok(());
            }
            let venv = crate::native::pyenv_dir();
            for lib in venv_nvrtc(&venv) {
                if !dlopen_global(&lib) {
                    log::debug!("NVRTC: cannot load {}", lib.display());
                }
            }
            // SAFETY: as above.
            if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                Ok(())
            } else {
                Err(format!("{}/lib/python3*/site-packages/nvidia/*/lib", venv.display()))
            }
        })
        .clone()
        .map_err(CudaKernelError::NoNvrtc)
}

/// The kernel as PTX, compiled by NVRTC with FMA contraction off.
pub fn compile() -> Result<cudarc::nvrtc::Ptx, CudaKernelError> {
    nvrtc()?;
    let opts =
        cudarc::nvrtc::CompileOptions { fmad: Some(false), name: Some("env_step.cu".into()), ..Default::default() };
    cudarc::nvrtc::compile_ptx_with_opts(super::SOURCE, opts).map_err(|e| CudaKernelError::Compile(e.to_string()))
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

    /// Without a CUDA device the kernel env refuses with a clear error, never a panic.
    #[test]
    fn the_kernel_env_refuses_a_cpu_device() {
        let panel = crate::env::tests::real_panel();
        let cfg = EnvConfig { n_envs: 4, episode_len: 30, ..Default::default() };
        let e = CudaKernelEnv::new(&cfg, &panel, Device::Cpu).err().unwrap();
        assert!(matches!(e, CudaKernelError::NotCuda), "{e}");
    }

    /// The CUDA build against the CPU build, bit for bit, over random actions on the shipped data with
    /// stops, cooldowns, turbulence and every accounting option (the CPU build is itself checked against
    /// `VecEnv`). Needs a GPU: `make test-gpu`.
    #[test]
    #[ignore = "needs a CUDA GPU: run with `make test-gpu`"]
    fn kernel_cuda_build_agrees_with_the_cpu_build_bit_for_bit() {
        use super::super::CpuKernelEnv;
        use super::super::tests::{bits, configs, f32_bits, panel_with_turbulence, random_actions};
        assert!(crate::native::load_torch_cuda(), "no CUDA device: this test needs a GPU");
        let panel = panel_with_turbulence();
        for (v, cfg) in configs(300).into_iter().enumerate() {
            let mut want = CpuKernelEnv::new(&cfg, panel.clone()).unwrap();
            let mut got = CudaKernelEnv::new(&cfg, &panel, Device::Cuda(0)).unwrap();
            let obs = |t: &Tensor| Vec::<f32>::try_from(t.view([-1])).unwrap();
            assert_eq!(f32_bits(&obs(&got.obs)), f32_bits(want.obs()), "variant {v}: first observation");
            let mut rng = crate::env::rng::SplitMix64::new(v as u64);
            let mut actions = vec![0f32; cfg.n_envs * panel.n_assets];
            let (mut s_want, mut s_got) = (Step::default(), Step::default());
            for s in 0..200 {
                random_actions(&mut rng, &mut actions);
                want.step(&actions, &mut s_want).unwrap();
                got.step_host(&actions, &mut s_got).unwrap();
                let at = format!("variant {v} step {s}");
                assert_eq!(f32_bits(&s_got.reward), f32_bits(&s_want.reward), "{at}: reward");
                assert_eq!(bits(&s_got.equity), bits(&s_want.equity), "{at}: equity");
                assert_eq!(s_got.done, s_want.done, "{at}: done");
                assert_eq!(bits(&got.cash().unwrap()), bits(want.cash()), "{at}: cash");
                assert_eq!(bits(&got.holdings().unwrap()), bits(want.holdings()), "{at}: holdings");
                assert_eq!(f32_bits(&obs(&got.obs)), f32_bits(want.obs()), "{at}: observation");
            }
            // Summed on the device in another order than on the host: the count exactly, the sum closely.
            let ((sum, count), (want_sum, want_count)) = (got.take_returns().unwrap(), want.take_returns());
            assert_eq!(count, want_count, "variant {v}: finished episodes");
            assert!((sum - want_sum).abs() <= 1e-9 * count.max(1.0), "variant {v}: returns {sum} vs {want_sum}");
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
}
