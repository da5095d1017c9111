//! The device a command asks for (`--device cpu | cuda | cuda:N | auto`) and what actually ran.
//!
//! `cuda` (or `cuda:N`) is a demand: the env kernel runs on that GPU, or the command fails with the reason.
//! `auto` takes CUDA when it is usable and falls back to the CPU with one WARN naming why. What ran
//! ([`Ran`]: the device and the env) goes into the JSON lines, the model's manifest and the bench rows, so a
//! figure is never a CPU figure presented as a GPU one.

use std::fmt;
use std::str::FromStr;

/// What `--device` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRequest {
    Cpu,
    /// CUDA device `N` (`cuda` is `cuda:0`): the command fails where it cannot run there.
    Cuda(usize),
    /// CUDA device 0 when usable, else the CPU (one WARN says why).
    Auto,
}

/// A `--device` that is none of `auto`, `cpu`, `cuda`, `cuda:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--device {0:?}: must be auto, cpu, cuda or cuda:N (N a CUDA device index, 0, 1, ...)")]
pub struct BadDevice(pub String);

impl FromStr for DeviceRequest {
    type Err = BadDevice;

    fn from_str(s: &str) -> Result<Self, BadDevice> {
        let bad = || BadDevice(s.to_string());
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(DeviceRequest::Cpu),
            "auto" => Ok(DeviceRequest::Auto),
            "cuda" => Ok(DeviceRequest::Cuda(0)),
            other => match other.strip_prefix("cuda:") {
                Some(n) => n.parse().map(DeviceRequest::Cuda).map_err(|_| bad()),
                None => Err(bad()),
            },
        }
    }
}

impl DeviceRequest {
    /// `--device` parsed for clap (`value_parser`): the command line's one parse of the device, the
    /// error naming what is accepted.
    pub fn parse_arg(s: &str) -> Result<DeviceRequest, BadDevice> {
        s.parse()
    }

    /// The request for exactly `d`: a device already settled (a search's trials hold to the study's).
    #[cfg(feature = "train")]
    pub fn exact(d: tch::Device) -> DeviceRequest {
        match d {
            tch::Device::Cuda(n) => DeviceRequest::Cuda(n),
            _ => DeviceRequest::Cpu,
        }
    }
}

impl fmt::Display for DeviceRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceRequest::Cpu => f.write_str("cpu"),
            DeviceRequest::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceRequest::Auto => f.write_str("auto"),
        }
    }
}

/// The environment that stepped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvBackend {
    /// The env kernel (`env::kernel`), on the training device: the rollout stays there.
    Kernel,
    /// `VecEnv` on the host, each step's batch copied to the training device.
    VecEnv,
}

impl EnvBackend {
    /// The name in JSON lines, manifests and bench rows: `kernel` or `VecEnv`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EnvBackend::Kernel => "kernel",
            EnvBackend::VecEnv => "VecEnv",
        }
    }
}

/// What actually ran: the request, the device (`cpu`, `cuda:0`, ...) and the env.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ran {
    pub requested: DeviceRequest,
    pub device: String,
    pub env: EnvBackend,
}

impl Ran {
    /// `{"requested": "auto", "device": "cpu", "env": "VecEnv"}`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "requested": self.requested.to_string(), "device": self.device, "env": self.env.as_str() })
    }

    /// Adds `device` and `env` (and `device_requested`) to a JSON object line.
    pub(crate) fn tag(&self, line: &mut serde_json::Value) {
        if let Some(o) = line.as_object_mut() {
            o.insert("device".into(), self.device.clone().into());
            o.insert("env".into(), self.env.as_str().into());
            o.insert("device_requested".into(), self.requested.to_string().into());
        }
    }
}

/// The torch device `req` resolves to. `cuda:N` fails, naming why, where CUDA device N is not usable;
/// `auto` falls back to the CPU with one WARN naming why.
#[cfg(feature = "train")]
pub(crate) fn resolve(req: DeviceRequest) -> anyhow::Result<tch::Device> {
    use tch::Device;
    match req {
        DeviceRequest::Cpu => Ok(Device::Cpu),
        DeviceRequest::Cuda(n) => match cuda_unusable(n) {
            None => Ok(Device::Cuda(n)),
            Some(why) => anyhow::bail!(
                "--device {req}: no usable CUDA device: {why}; run `tradebot doctor` for details, or use --device cpu (or auto, which falls back to the CPU)"
            ),
        },
        DeviceRequest::Auto => match cuda_unusable(0) {
            None => Ok(Device::Cuda(0)),
            Some(why) => {
                log::warn!("--device auto: no usable CUDA device ({why}); running on the CPU");
                Ok(Device::Cpu)
            }
        },
    }
}

/// Why CUDA device `n` cannot be used by libtorch, or `None` where it can.
#[cfg(feature = "train")]
pub fn cuda_unusable(n: usize) -> Option<String> {
    if !crate::runtime_libs::load_torch_cuda() {
        return Some(match crate::env::kernel::probe::driver() {
            Err(why) => why.to_string(),
            Ok(d) if d.devices.is_empty() => {
                format!("the CUDA driver (CUDA {}.{}) sees no device{}", d.cuda_version.0, d.cuda_version.1, visible())
            }
            Ok(d) => format!(
                "libtorch cannot use CUDA beside the driver's CUDA {}.{} (a CPU-only libtorch, or one built for a newer CUDA)",
                d.cuda_version.0, d.cuda_version.1
            ),
        });
    }
    let count = tch::Cuda::device_count().max(0) as usize;
    (n >= count).then(|| format!("cuda:{n} asked for, {count} CUDA device(s) visible{}", visible()))
}

/// " (CUDA_VISIBLE_DEVICES=...)" where it is set.
#[cfg(feature = "train")]
fn visible() -> String {
    std::env::var("CUDA_VISIBLE_DEVICES").map(|v| format!(" (CUDA_VISIBLE_DEVICES={v})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_print_back() {
        for (s, want) in [
            ("cpu", DeviceRequest::Cpu),
            ("auto", DeviceRequest::Auto),
            ("cuda", DeviceRequest::Cuda(0)),
            ("cuda:1", DeviceRequest::Cuda(1)),
            ("CUDA:0", DeviceRequest::Cuda(0)),
        ] {
            assert_eq!(s.parse::<DeviceRequest>(), Ok(want), "{s}");
        }
        assert_eq!(DeviceRequest::Cuda(0).to_string(), "cuda:0");
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:-1", ""] {
            let e = bad.parse::<DeviceRequest>().unwrap_err().to_string();
            assert!(e.contains("must be auto, cpu, cuda or cuda:N"), "{bad}: {e}");
        }
    }

    #[test]
    fn what_ran_tags_a_json_line() {
        let ran = Ran { requested: DeviceRequest::Auto, device: "cpu".into(), env: EnvBackend::VecEnv };
        let mut line = serde_json::json!({"event": "done"});
        ran.tag(&mut line);
        assert_eq!(line["device"], "cpu");
        assert_eq!(line["env"], "VecEnv");
        assert_eq!(line["device_requested"], "auto");
        assert_eq!(ran.to_json()["env"], "VecEnv");
    }

    #[cfg(feature = "train")]
    #[test]
    fn cuda_is_met_or_refused_naming_why_and_auto_follows() {
        match cuda_unusable(0) {
            None => {
                assert_eq!(resolve(DeviceRequest::Cuda(0)).unwrap(), tch::Device::Cuda(0));
                assert_eq!(resolve(DeviceRequest::Auto).unwrap(), tch::Device::Cuda(0));
            }
            Some(why) => {
                let e = resolve(DeviceRequest::Cuda(0)).unwrap_err().to_string();
                assert!(e.contains("--device cuda:0: no usable CUDA device") && e.contains(&why), "{e}");
                assert!(e.contains("--device cpu"), "{e}");
                assert_eq!(resolve(DeviceRequest::Auto).unwrap(), tch::Device::Cpu);
            }
        }
        let e = resolve(DeviceRequest::Cuda(4096)).unwrap_err().to_string();
        assert!(e.contains("cuda:4096"), "{e}");
    }
}
