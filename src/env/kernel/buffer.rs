//! The checks a kernel launch makes on the tensors whose raw pointers it passes: each buffer's element
//! kind, contiguity, element count and device against what the launch reads or writes, from the tensor's
//! host-side metadata only (no synchronisation with the device). A buffer that fails is refused with its
//! name before any pointer reaches the kernel: a wrong-sized or wrong-device tensor is an error, never an
//! out-of-bounds write or a host pointer handed to the GPU.

use super::cuda::KernelEnvError;
use tch::{Device, Kind, Tensor};

/// A device as people read it: `the CPU`, `cuda:0`.
pub(crate) fn device_name(d: Device) -> String {
    match d {
        Device::Cpu => "the CPU".into(),
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Mps => "mps".into(),
        Device::Vulkan => "vulkan".into(),
    }
}

/// Refuses `t` as the kernel's buffer `name` unless it is a dense, contiguous tensor of `numel` elements
/// of `kind` on `device`. Reads metadata only: safe to call before every launch.
pub(crate) fn check_buffer(
    name: &'static str,
    t: &Tensor,
    kind: Kind,
    numel: usize,
    device: Device,
) -> Result<(), KernelEnvError> {
    let want = || format!("{numel} contiguous {kind:?} elements on {}", device_name(device));
    let refuse = |got: String| Err(KernelEnvError::Buffer { name, got, want: want() });
    if !t.defined() {
        return refuse("an undefined tensor".into());
    }
    if t.is_sparse() || t.is_mkldnn() {
        return refuse("a tensor without a dense layout".into());
    }
    // `numel` and `device` read the shape and the device index only; `kind` as an error, not a panic.
    let (got_kind, got_device, got_numel) = (t.f_kind(), t.device(), t.numel());
    let contiguous = t.is_contiguous();
    if got_kind.as_ref().ok() == Some(&kind) && contiguous && got_numel == numel && got_device == device {
        return Ok(());
    }
    let got_kind = got_kind.map_or_else(|_| "an unknown kind".to_string(), |k| format!("{k:?}"));
    let layout = if contiguous { "contiguous" } else { "non-contiguous" };
    refuse(format!("{got_numel} {layout} {got_kind} elements on {}", device_name(got_device)))
}

/// `a * b` for the kernel's `i32` indexing, or an error naming `what`.
pub(crate) fn mul_i32(what: &str, a: i32, b: i32) -> Result<i32, KernelEnvError> {
    a.checked_mul(b).ok_or_else(|| too_large(what, format!("{a} x {b}")))
}

/// The sum of `parts` for the kernel's `i32` indexing, or an error naming `what`.
pub(crate) fn sum_i32(what: &str, parts: impl IntoIterator<Item = i32>) -> Result<i32, KernelEnvError> {
    let mut total: i32 = 0;
    for p in parts {
        total = total.checked_add(p).ok_or_else(|| too_large(what, format!("more than {}", i32::MAX)))?;
    }
    Ok(total)
}

fn too_large(what: &str, value: String) -> KernelEnvError {
    KernelEnvError::TooLarge(format!(
        "{what} is {value}: the env kernel indexes with 32-bit integers; use fewer envs or trials per launch"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<(), KernelEnvError>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_buffer_of_the_wrong_kind_size_layout_or_device_is_refused_with_its_name() {
        let cpu = Device::Cpu;
        let ok = Tensor::zeros([4, 3], (Kind::Float, cpu));
        assert!(check_buffer("obs", &ok, Kind::Float, 12, cpu).is_ok());
        // A CPU tensor where the launch expects CUDA memory: refused on the metadata, no GPU needed.
        let e = err(check_buffer("obs", &ok, Kind::Float, 12, Device::Cuda(0)));
        assert!(e.contains("`obs`") && e.contains("the CPU") && e.contains("cuda:0"), "{e}");
        let e = err(check_buffer("obs", &ok, Kind::Float, 13, cpu));
        assert!(e.contains("12 contiguous") && e.contains("needs 13"), "{e}");
        let e = err(check_buffer("cash", &ok, Kind::Double, 12, cpu));
        assert!(e.contains("`cash`") && e.contains("Float") && e.contains("Double"), "{e}");
        let strided = Tensor::zeros([4, 6], (Kind::Float, cpu)).narrow(1, 0, 3);
        let e = err(check_buffer("obs", &strided, Kind::Float, 12, cpu));
        assert!(e.contains("non-contiguous"), "{e}");
        let e = err(check_buffer("obs", &Tensor::new(), Kind::Float, 12, cpu));
        assert!(e.contains("undefined"), "{e}");
    }

    #[test]
    fn the_i32_sums_and_products_refuse_an_overflow() {
        assert_eq!(sum_i32("envs", [2, 3]).unwrap(), 5);
        let e = sum_i32("the population's env count", [i32::MAX, 1]).unwrap_err().to_string();
        assert!(e.contains("the population's env count") && e.contains("32-bit"), "{e}");
        assert_eq!(mul_i32("positions", 7, 6).unwrap(), 42);
        assert!(mul_i32("positions", 1 << 16, 1 << 16).is_err());
    }
}
