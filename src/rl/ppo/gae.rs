//! GAE(λ) as one reverse-scan kernel (`gae.c`): on CUDA the NVRTC build, one thread per env and one launch
//! per update in place of about 8·T small tensor ops (eight element-wise ops a step in `gae_ops`); on the CPU the `cc` build over CPU tensors (tests).
//! It computes what `gae_ops` (the tensor ops, a reference) computes, bit for bit (tested on the
//! CPU; the CUDA build compiles with FMA contraction off).
// The kernel is C: calling it passes raw pointers to tensors we hold and size.
#![allow(unsafe_code)]

use crate::env::kernel::cuda::{CudaProgram, launch_config};
use crate::env::kernel::{KernelEnvError, check_buffer};
use cudarc::driver::PushKernelArg;
use tch::{Device, Kind, Tensor};

/// The kernel source, for NVRTC.
pub(super) const SOURCE: &str = include_str!("gae.c");

/// `tb_gae_params` in `gae.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Params {
    gamma: f32,
    gamma_lambda: f32,
    t_len: i32,
    n_envs: i32,
}

/// `tb_gae_buffers` in `gae.c`: host pointers for the CPU build, device pointers for CUDA.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Buffers {
    rewards: *const f32,
    values: *const f32,
    dones: *const f32,
    last_value: *const f32,
    advantages: *mut f32,
}

// SAFETY: plain `#[repr(C)]` data mirroring the C structs, passed by value as the kernel's arguments.
unsafe impl cudarc::driver::DeviceRepr for Params {}
// SAFETY: as above; the pointers are device pointers of tensors the caller keeps alive.
unsafe impl cudarc::driver::DeviceRepr for Buffers {}

unsafe extern "C" {
    fn tb_gae(p: *const Params, b: *const Buffers, lo: i32, hi: i32);
}

/// The kernel for one device (a clone shares the loaded CUDA module).
#[derive(Clone)]
pub(super) enum GaeKernel {
    Cpu,
    Cuda(std::sync::Arc<CudaProgram>),
}

impl GaeKernel {
    pub(super) fn new(device: Device) -> Result<GaeKernel, KernelEnvError> {
        match device {
            Device::Cpu => Ok(GaeKernel::Cpu),
            Device::Cuda(i) => {
                Ok(GaeKernel::Cuda(std::sync::Arc::new(CudaProgram::load(i, SOURCE, "gae.cu", &["tb_gae"])?)))
            }
            other => Err(KernelEnvError::device(other)),
        }
    }

    /// The device the kernel runs on: its buffers must all be there.
    pub(super) fn device(&self) -> Device {
        match self {
            GaeKernel::Cpu => Device::Cpu,
            GaeKernel::Cuda(program) => Device::Cuda(program.stream().context().ordinal()),
        }
    }

    /// The advantages `[T, E]` of a rollout's rewards, values and done flags (`[T, E]`, on this kernel's
    /// device; converted to contiguous f32 there) and the value after it (`[E]`). Tensors on another
    /// device are refused (a host pointer is never passed to the GPU, nor a device pointer to the CPU).
    pub(super) fn advantages(
        &self,
        gamma: f64,
        lambda: f64,
        rewards: &Tensor,
        values: &Tensor,
        dones: &Tensor,
        last_value: &Tensor,
    ) -> Result<Tensor, KernelEnvError> {
        let size = rewards.size();
        let (t_len, n_envs) = match size[..] {
            [t, e] if values.size() == size && dones.size() == size && last_value.size() == [e] => (t, e),
            _ => {
                return Err(KernelEnvError::Shapes {
                    what: "GAE: rollout",
                    shapes: format!("{size:?}, {:?}, {:?} and {:?}", values.size(), dones.size(), last_value.size()),
                });
            }
        };
        let (Ok(t), Ok(e)) = (i32::try_from(t_len), i32::try_from(n_envs)) else {
            return Err(KernelEnvError::TooLarge(format!("GAE: a rollout of {t_len} x {n_envs} is too large")));
        };
        let Some(cells) = t.checked_mul(e) else {
            return Err(KernelEnvError::TooLarge(format!("GAE: a rollout of {t_len} x {n_envs} is too large")));
        };
        let device = self.device();
        let f32c = |x: &Tensor| x.f_to_kind(Kind::Float)?.f_contiguous();
        let (r, v, d, lv) = (f32c(rewards)?, f32c(values)?, f32c(dones)?, f32c(last_value)?);
        let adv = Tensor::f_zeros([t_len, n_envs], (Kind::Float, device))?;
        // Host metadata only: the kind, layout, size and device of every pointer the launch takes.
        let (cells, envs) = (cells as usize, e as usize);
        check_buffer("GAE rewards", &r, Kind::Float, cells, device)?;
        check_buffer("GAE values", &v, Kind::Float, cells, device)?;
        check_buffer("GAE dones", &d, Kind::Float, cells, device)?;
        check_buffer("GAE last_value", &lv, Kind::Float, envs, device)?;
        check_buffer("GAE advantages", &adv, Kind::Float, cells, device)?;
        let p = Params { gamma: gamma as f32, gamma_lambda: (gamma * lambda) as f32, t_len: t, n_envs: e };
        let b = Buffers {
            rewards: r.data_ptr() as *const f32,
            values: v.data_ptr() as *const f32,
            dones: d.data_ptr() as *const f32,
            last_value: lv.data_ptr() as *const f32,
            advantages: adv.data_ptr() as *mut f32,
        };
        match self {
            // SAFETY: `check_buffer` above: every pointer is a contiguous f32 tensor on the CPU of T x E (E
            // for `last_value`) elements, alive for the call (held here) and touched by nothing else.
            GaeKernel::Cpu => unsafe { tb_gae(&p, &b, 0, e) },
            GaeKernel::Cuda(program) => {
                let mut args = program.stream().launch_builder(program.function(0));
                args.arg(&p).arg(&b);
                // SAFETY: the kernel takes (tb_gae_params, tb_gae_buffers) by value, mirrored above; the
                // pointers are contiguous f32 tensors on this program's device of the sizes `check_buffer`
                // checked, and later work on them (libtorch's, the caching allocator's reuse once `r`, `v`,
                // `d` or `lv` drop) is ordered after the launch on the same (legacy default) stream.
                unsafe { args.launch(launch_config(n_envs as usize)) }
                    .map_err(|e| KernelEnvError::Driver(e.to_string()))?;
            }
        }
        Ok(adv)
    }
}

/// GAE(λ) with tensor ops, backwards in time: the reference the kernel and a population's per-trial GAE are
/// tested against.
#[cfg(test)]
pub(super) fn gae_ops(
    gamma: f64,
    lambda: f64,
    rewards: &Tensor,
    values: &Tensor,
    dones: &Tensor,
    last_value: &Tensor,
) -> Tensor {
    let t_len = rewards.size()[0];
    let mut adv = Vec::with_capacity(t_len as usize);
    let mut last = last_value.zeros_like();
    for t in (0..t_len).rev() {
        let not_done = 1.0 - dones.get(t);
        let next_value = if t + 1 == t_len { last_value.shallow_clone() } else { values.get(t + 1) };
        let delta = rewards.get(t) + &next_value * gamma * &not_done - values.get(t);
        last = delta + &last * (gamma * lambda) * &not_done;
        adv.push(last.shallow_clone());
    }
    adv.reverse();
    Tensor::stack(&adv, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's CPU build against the tensor ops, bit for bit, on a rollout with episode ends, and a
    /// shape mismatch refused.
    #[test]
    fn the_kernel_computes_the_tensor_ops_bits() {
        let (t, e) = (37, 19);
        let opts = (Kind::Float, Device::Cpu);
        // Any draws do: both sides see the same tensors.
        let (rewards, values) = (Tensor::randn([t, e], opts), Tensor::randn([t, e], opts) * 3.0);
        let (dones, last) = (Tensor::rand([t, e], opts).lt(0.1).to_kind(Kind::Float), Tensor::randn([e], opts));
        assert!(dones.sum(Kind::Float).double_value(&[]) > 0.0, "no episode end: a weak test");
        let want = gae_ops(0.99, 0.95, &rewards, &values, &dones, &last);
        let got =
            GaeKernel::new(Device::Cpu).unwrap().advantages(0.99, 0.95, &rewards, &values, &dones, &last).unwrap();
        let bits =
            |x: &Tensor| Vec::<f32>::try_from(x.reshape([-1])).unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        let err = GaeKernel::Cpu.advantages(0.99, 0.95, &rewards, &values, &dones, &values).unwrap_err();
        assert!(err.to_string().contains("shapes"), "{err}");
    }

    /// The CUDA build compiles (no GPU needed) with its entry point and no fused multiply-add.
    #[test]
    fn the_gae_kernel_compiles_for_cuda_without_fma() {
        let ptx = crate::env::kernel::cuda::compile_source(SOURCE, "gae.cu").unwrap_or_else(|e| panic!("{e}")).to_src();
        assert!(ptx.contains(".entry tb_gae("), "no entry point in the PTX");
        assert!(!ptx.contains("fma.rn.f32"), "FMA contraction is on");
    }

    /// Needs a CUDA GPU (feature `gpu-tests`, `make test-gpu`): fails without one.
    #[cfg(feature = "gpu-tests")]
    mod gpu_tests {
        use super::*;

        /// The CUDA build against the CPU build, bit for bit. Needs a GPU: `make test-gpu`.
        #[test]
        fn gae_cuda_build_agrees_with_the_cpu_build_bit_for_bit() {
            assert!(crate::runtime_libs::load_torch_cuda(), "no CUDA device: this test needs a GPU");
            let (t, e) = (128, 4096);
            let opts = (Kind::Float, Device::Cpu);
            let (rewards, values) = (Tensor::randn([t, e], opts), Tensor::randn([t, e], opts) * 3.0);
            let (dones, last) = (Tensor::rand([t, e], opts).lt(0.02).to_kind(Kind::Float), Tensor::randn([e], opts));
            let want = GaeKernel::Cpu.advantages(0.99, 0.95, &rewards, &values, &dones, &last).unwrap();
            let cuda = Device::Cuda(0);
            let k = GaeKernel::new(cuda).unwrap();
            let on = |x: &Tensor| x.to_device(cuda);
            let got = k.advantages(0.99, 0.95, &on(&rewards), &on(&values), &on(&dones), &on(&last)).unwrap();
            let bits = |x: &Tensor| {
                Vec::<f32>::try_from(x.to_device(Device::Cpu).reshape([-1]))
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&got), bits(&want));
        }
    }
}
