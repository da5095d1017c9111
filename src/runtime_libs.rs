//! Finding and loading the runtime libraries: ONNX Runtime (loaded at run time, `ort`'s `load-dynamic`) and libtorch
//! (linked by `tch` behind the `train` feature, found through an rpath recorded at build time).
//!
//! Both come from PyPI wheels installed by `make venv` into a venv outside the clone, keyed by version:
//! `~/.cache/tradebot/py-torch2.11.0-ort1.31.1` unless `TRADEBOT_PYENV` says otherwise.
// dlopen/dlerror to preload libtorch's CUDA library: a C API with no safe wrapper in the crates we use.
#![allow(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub(crate) const TORCH_VERSION: &str = "2.11.0";
pub(crate) const ORT_VERSION: &str = "1.31.1";
pub(crate) const PYENV_VAR: &str = "TRADEBOT_PYENV";

#[derive(Debug, thiserror::Error)]
pub enum OnnxRuntimeError {
    #[error(
        "ONNX Runtime library not found; looked at: {tried}. Install it with `make venv` (onnxruntime=={ORT_VERSION} into {venv}), or point ORT_DYLIB_PATH or the config key runtime.onnxruntime_lib at libonnxruntime.so"
    )]
    OrtMissing { tried: String, venv: String },
    #[error(
        "cannot load ONNX Runtime from {path}: {reason}. Is it a libonnxruntime.so for this machine (version {ORT_VERSION} expected)?"
    )]
    OrtLoad { path: String, reason: String },
    /// The first attempt's error, returned again to later callers.
    #[error("{0}")]
    Earlier(String),
}

/// The project's Python venv: `$TRADEBOT_PYENV`, else the one the binary was built against, else the
/// default cache path.
pub(crate) fn pyenv_dir() -> PathBuf {
    if let Some(p) = std::env::var_os(PYENV_VAR).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = option_env!("TRADEBOT_BUILD_PYENV").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(format!(".cache/tradebot/py-torch{TORCH_VERSION}-ort{ORT_VERSION}"))
}

/// The venv's Python interpreter (used by tests and benchmarks, never by the daemon).
pub fn pyenv_python() -> PathBuf {
    pyenv_dir().join("bin/python")
}

/// `site-packages/onnxruntime/capi/libonnxruntime.so.*` inside a venv, newest version first.
fn venv_ort(venv: &Path) -> Option<PathBuf> {
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    let mut found = Vec::new();
    for py in lib.flatten() {
        let capi = py.path().join("site-packages/onnxruntime/capi");
        if let Ok(rd) = std::fs::read_dir(&capi) {
            for f in rd.flatten() {
                let name = f.file_name().to_string_lossy().to_string();
                if name.starts_with("libonnxruntime.so") {
                    found.push(f.path());
                }
            }
        }
    }
    found.sort();
    found.pop()
}

/// Finds libonnxruntime: the config key, then `ORT_DYLIB_PATH`, then the venv.
pub(crate) fn find_onnxruntime(configured: Option<&Path>) -> Result<PathBuf, OnnxRuntimeError> {
    let mut tried = Vec::new();
    if let Some(p) = configured {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        tried.push(format!("runtime.onnxruntime_lib = {}", p.display()));
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(format!("ORT_DYLIB_PATH = {}", p.display()));
    }
    let venv = pyenv_dir();
    if let Some(p) = venv_ort(&venv) {
        return Ok(p);
    }
    tried.push(format!("{}/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.*", venv.display()));
    Err(OnnxRuntimeError::OrtMissing { tried: tried.join("; "), venv: venv.display().to_string() })
}

/// ONNX Runtime, loaded: where the library came from and the process-wide environment that sessions
/// are built from (`Session::builder(&rt.env)`).
pub struct OnnxRuntime {
    pub path: PathBuf,
    pub env: ort::environment::Environment,
}

static ORT: OnceLock<Result<OnnxRuntime, OnnxRuntimeError>> = OnceLock::new();

/// Loads ONNX Runtime once per process. Later calls return the first result (ONNX Runtime cannot be
/// swapped inside a process).
pub fn init_onnxruntime(configured: Option<&Path>) -> Result<&'static OnnxRuntime, OnnxRuntimeError> {
    let r = ORT.get_or_init(|| {
        let path = find_onnxruntime(configured)?;
        let fail = |reason: String| OnnxRuntimeError::OrtLoad { path: path.display().to_string(), reason };
        let builder = ort::init_from(&path).map_err(|e| fail(e.to_string()))?;
        let env = builder.with_name("tradebot").build().map_err(|e| fail(e.to_string()))?;
        log::debug!("ONNX Runtime loaded from {}", path.display());
        Ok(OnnxRuntime { path, env })
    });
    r.as_ref().map_err(|e| OnnxRuntimeError::Earlier(e.to_string()))
}

/// Loads libtorch's CUDA backend. The linker drops `libtorch_cuda.so` under `--as-needed` because no
/// symbol of it is referenced directly, so without this `tch::Cuda::is_available()` is always false.
/// Returns whether CUDA is usable afterwards.
#[cfg(feature = "train")]
pub(crate) fn load_torch_cuda() -> bool {
    static LOADED: OnceLock<bool> = OnceLock::new();
    *LOADED.get_or_init(|| {
        // SAFETY: dlopen with a valid NUL-terminated name; the handle is deliberately kept open for the
        // life of the process.
        let h = unsafe { libc::dlopen(c"libtorch_cuda.so".as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if h.is_null() {
            // SAFETY: dlerror returns a thread-local C string or null.
            let err = unsafe { libc::dlerror() };
            if !err.is_null() {
                // SAFETY: a non-null dlerror result is a valid C string.
                let msg = unsafe { std::ffi::CStr::from_ptr(err) }.to_string_lossy();
                log::debug!("libtorch_cuda not loaded: {msg}");
            }
        }
        tch::Cuda::is_available()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_path_wins_and_missing_library_says_how_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("libonnxruntime.so.9");
        std::fs::write(&f, b"").unwrap();
        assert_eq!(find_onnxruntime(Some(&f)).unwrap(), f);
        // A venv layout is found by globbing.
        let capi = dir.path().join("venv/lib/python3.11/site-packages/onnxruntime/capi");
        std::fs::create_dir_all(&capi).unwrap();
        std::fs::write(capi.join("libonnxruntime.so.1.31.1"), b"").unwrap();
        assert_eq!(venv_ort(&dir.path().join("venv")).unwrap(), capi.join("libonnxruntime.so.1.31.1"));
        assert!(venv_ort(dir.path()).is_none());
        let err = OnnxRuntimeError::OrtMissing { tried: "x".into(), venv: "/v".into() }.to_string();
        assert!(err.contains("make venv") && err.contains("ORT_DYLIB_PATH"), "{err}");
    }
}
