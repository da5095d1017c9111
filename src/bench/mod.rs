//! `tradebot bench ...`: the benchmarks that check the speed targets (never timed tests), each a job
//! with its own arguments: the vectorized environment (`env`), PPO training end to end (`ppo`), the LSTM's
//! epochs (`lstm`), the daemon's decision latency on its own engine (`infer`), and a search's training
//! work, many trials at once (`tune`). `make bench-*` runs
//! each beside its Python peer on the same work.

pub mod env;
pub mod gpu;
pub mod gpu_peers;
pub mod infer;
pub mod lstm;
pub mod ppo;
#[cfg(feature = "train")]
mod steady;
pub mod tune;

use crate::training::device::DeviceRequest;

/// A bench's `--device` other than `cpu` or `cuda`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--device {0:?}: must be cpu or cuda")]
pub struct NotCpuOrCuda(pub String);

/// `--device` of the benches that run on the CPU or on CUDA device 0, parsed for clap (`value_parser`) as
/// `train`'s is (`DeviceRequest::parse_arg`): `cpu`, or `cuda` (`cuda:0`); the error says so.
pub fn cpu_or_cuda(s: &str) -> Result<DeviceRequest, NotCpuOrCuda> {
    match DeviceRequest::parse_arg(s) {
        Ok(d @ (DeviceRequest::Cpu | DeviceRequest::Cuda(0))) => Ok(d),
        _ => Err(NotCpuOrCuda(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_devices_are_cpu_or_cuda_zero() {
        assert_eq!(cpu_or_cuda("cpu"), Ok(DeviceRequest::Cpu));
        assert_eq!(cpu_or_cuda("cuda"), Ok(DeviceRequest::Cuda(0)));
        assert_eq!(cpu_or_cuda("CUDA:0"), Ok(DeviceRequest::Cuda(0)));
        for bad in ["tpu", "auto", "cuda:1", ""] {
            let e = cpu_or_cuda(bad).unwrap_err().to_string();
            assert_eq!(e, format!("--device {bad:?}: must be cpu or cuda"));
        }
    }
}
