//! What this machine offers the env kernel's CUDA build, for `tradebot doctor`: the CUDA driver and its
//! version, each visible CUDA device with its compute capability, and NVRTC (version and the file loaded).
//! Every probe answers with the reason where something is missing; nothing here panics or needs a GPU.

use std::path::PathBuf;

/// A CUDA device as the driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDevice {
    /// The driver's device number (as `cuda:N` names it).
    pub ordinal: usize,
    /// The device's name as the driver gives it.
    pub name: String,
    /// Compute capability (major, minor): 9.0 for an H100, 8.6 for an RTX 3070.
    pub compute_capability: (i32, i32),
    /// Total device memory, in MiB.
    pub memory_mib: u64,
}

/// The CUDA driver: its version (CUDA's, e.g. 13.0) and the devices it makes visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Driver {
    /// The newest CUDA version the driver runs (major, minor).
    pub cuda_version: (i32, i32),
    /// The devices it makes visible (possibly none).
    pub devices: Vec<CudaDevice>,
}

/// Why there is no usable CUDA driver.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DriverError {
    /// libcuda.so.1 is not found.
    #[error("no NVIDIA driver: libcuda.so.1 not found (no GPU, or its driver is not installed)")]
    Missing,
    /// `cuDriverGetVersion` failed (its result code).
    #[error("the CUDA driver does not say its version: {0}")]
    Version(String),
    /// `cuInit` failed.
    #[error("the CUDA driver (CUDA {}.{}) cannot start: {why}", version.0, version.1)]
    Start {
        /// The driver's CUDA version (major, minor).
        version: (i32, i32),
        /// The driver's error.
        why: String,
    },
    /// `cuDeviceGetCount` failed (the driver's error).
    #[error("the CUDA driver cannot count its devices: {0}")]
    Count(String),
    /// A device's attributes could not be read.
    #[error("CUDA device {ordinal}: {why}")]
    Device {
        /// The device's number.
        ordinal: i32,
        /// The driver's error.
        why: String,
    },
}

/// Why there is no usable CUDA driver, or the driver and its devices (which may be none).
pub fn driver() -> Result<Driver, DriverError> {
    // SAFETY: only tries dlopen on candidate names and closes what it opened.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(DriverError::Missing);
    }
    let mut v = 0;
    // SAFETY: the driver library is present (checked above); cuDriverGetVersion writes one int.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        return Err(DriverError::Version(format!("{r:?}")));
    }
    let cuda_version = (v / 1000, (v % 1000) / 10);
    use cudarc::driver::result;
    result::init().map_err(|e| DriverError::Start { version: cuda_version, why: e.to_string() })?;
    let count = result::device::get_count().map_err(|e| DriverError::Count(e.to_string()))?;
    let mut devices = Vec::new();
    for ordinal in 0..count.max(0) {
        let device = |e: cudarc::driver::DriverError| DriverError::Device { ordinal, why: e.to_string() };
        let dev = result::device::get(ordinal).map_err(device)?;
        let attr = |a| {
            // SAFETY: `dev` is a device handle the driver returned; the attribute is read into an int.
            unsafe { result::device::get_attribute(dev, a) }.map_err(device)
        };
        use cudarc::driver::sys::CUdevice_attribute as A;
        let cc = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        // SAFETY: as above; the total memory is read into a usize.
        let bytes = unsafe { result::device::total_mem(dev) }.map_err(device)?;
        let name = result::device::get_name(dev).unwrap_or_else(|_| "(unnamed)".into());
        devices.push(CudaDevice {
            ordinal: ordinal as usize,
            name,
            compute_capability: cc,
            memory_mib: bytes as u64 / (1024 * 1024),
        });
    }
    Ok(Driver { cuda_version, devices })
}

/// NVRTC as the env kernel loads it: its version and the file, or why it cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nvrtc {
    /// NVRTC's CUDA version (major, minor).
    pub version: (i32, i32),
    /// The library file mapped into this process (`None` where /proc cannot say).
    pub path: Option<PathBuf>,
}

/// Loads NVRTC as the env kernel would and says which it is, or why it cannot.
pub fn nvrtc() -> Result<Nvrtc, super::KernelEnvError> {
    let (version, path) = super::nvrtc::loaded()?;
    Ok(Nvrtc { version: (version.0, version.1), path: Some(PathBuf::from(path)) })
}

/// The file of a loaded library whose name starts with `prefix` (from /proc/self/maps).
pub fn mapped_library(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(PathBuf::from)
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_library_is_found_by_its_prefix_and_a_missing_one_is_not() {
        let libc = mapped_library("libc.so").or_else(|| mapped_library("libc-"));
        assert!(libc.is_some_and(|p| p.is_absolute()), "the C library is mapped into every process");
        assert_eq!(mapped_library("libno-such-library-here"), None);
    }

    #[test]
    fn the_driver_probe_answers_without_panicking() {
        match driver() {
            Ok(d) => assert!(d.cuda_version.0 >= 10 && d.devices.iter().all(|x| x.compute_capability.0 >= 3), "{d:?}"),
            Err(e) => assert!(e.to_string().contains("driver"), "{e}"),
        }
    }
}
