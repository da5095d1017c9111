//! Autocast's reduced-precision type on CUDA. tch's `autocast` turns autocast on and off but leaves its
//! type at libtorch's default, float16, which needs loss scaling to train safely; bfloat16 has float32's
//! exponent range and needs none. libtorch's `at::autocast::set_autocast_dtype` sets it, but tch's C API
//! does not export it: it is looked up in the loaded libtorch by its (Itanium C++ ABI) symbol at run time.
//! Both of its arguments are `enum class : int8_t` (`c10::DeviceType`, `c10::ScalarType`), passed as
//! integers. The setting is per thread: set it on the thread that trains.
// Calls into libtorch through a looked-up function pointer.
#![allow(unsafe_code)]

use std::ffi::CStr;
use tch::Kind;

const SET: &CStr = c"_ZN2at8autocast18set_autocast_dtypeEN3c1010DeviceTypeENS1_10ScalarTypeE";
#[cfg(test)]
const GET: &CStr = c"_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE";
/// `c10::DeviceType::CUDA`.
const CUDA: i8 = 1;
/// `c10::ScalarType` (torch/headeronly/core/ScalarType.h: Byte, Char, Short, Int, Long, Half, Float, ...).
const HALF: i8 = 5;
#[cfg(test)]
const FLOAT: i8 = 6;
const BFLOAT16: i8 = 15;

/// Why autocast's type cannot be set or read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum AutocastError {
    #[error("libtorch has no {0} (another libtorch version?)")]
    NoSymbol(String),
    #[error("autocast runs in bfloat16 or float16, not {0:?}")]
    Kind(Kind),
    #[error("autocast's CUDA type is libtorch scalar type {0}")]
    #[cfg(test)]
    Unknown(i8),
}

fn lookup(name: &CStr) -> Result<*mut libc::c_void, AutocastError> {
    // SAFETY: dlsym with a valid NUL-terminated name in the process's global scope, where libtorch is loaded.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if f.is_null() { Err(AutocastError::NoSymbol(name.to_string_lossy().into_owned())) } else { Ok(f) }
}

/// Sets autocast's type on CUDA for this thread (`Kind::BFloat16` or `Kind::Half`).
pub(crate) fn set_cuda_dtype(kind: Kind) -> Result<(), AutocastError> {
    let code = match kind {
        Kind::BFloat16 => BFLOAT16,
        Kind::Half => HALF,
        other => return Err(AutocastError::Kind(other)),
    };
    let f = lookup(SET)?;
    // SAFETY: `f` is `void at::autocast::set_autocast_dtype(c10::DeviceType, c10::ScalarType)`, both
    // arguments int8_t-backed enums, which the C calling convention passes as `i8`; the values are valid
    // enumerators (CUDA; BFloat16 or Half).
    let set: unsafe extern "C" fn(i8, i8) = unsafe { std::mem::transmute(f) };
    unsafe { set(CUDA, code) };
    Ok(())
}

/// `mixed_precision`'s type for the trainer on this thread: bfloat16, or (said once per call) libtorch's
/// float16 where the symbol cannot be found.
pub(crate) fn bfloat16_on_this_thread() {
    if let Err(e) = set_cuda_dtype(Kind::BFloat16) {
        log::warn!("mixed precision: cannot switch autocast to bfloat16 ({e}); it runs in float16");
    }
}

/// Autocast's type on CUDA for this thread.
#[cfg(test)]
pub(crate) fn cuda_dtype() -> Result<Kind, AutocastError> {
    let f = lookup(GET)?;
    // SAFETY: `f` is `c10::ScalarType at::autocast::get_autocast_dtype(c10::DeviceType)`: an int8_t-backed
    // enum in and out.
    let get: unsafe extern "C" fn(i8) -> i8 = unsafe { std::mem::transmute(f) };
    let code = unsafe { get(CUDA) };
    match code {
        BFLOAT16 => Ok(Kind::BFloat16),
        HALF => Ok(Kind::Half),
        FLOAT => Ok(Kind::Float),
        other => Err(AutocastError::Unknown(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setting round-trips through libtorch itself (no GPU needed: autocast's state is host-side),
    /// and it is per thread.
    #[test]
    fn bfloat16_is_set_and_read_back_by_libtorch() {
        std::thread::spawn(|| {
            assert_eq!(cuda_dtype().unwrap(), Kind::Half, "libtorch's default");
            set_cuda_dtype(Kind::BFloat16).unwrap();
            assert_eq!(cuda_dtype().unwrap(), Kind::BFloat16);
            std::thread::spawn(|| assert_eq!(cuda_dtype().unwrap(), Kind::Half, "another thread")).join().unwrap();
            set_cuda_dtype(Kind::Half).unwrap();
            assert_eq!(cuda_dtype().unwrap(), Kind::Half);
            assert!(set_cuda_dtype(Kind::Float).unwrap_err().to_string().contains("bfloat16 or float16"));
        })
        .join()
        .unwrap();
    }
}
