//! NVRTC, the CUDA runtime compiler, found and called for the device in hand: the library beside the
//! libtorch this process loaded (its PyPI `nvidia` packages), else the project's venv, else the system's,
//! chosen by the CUDA version in its file name (the highest one the driver runs), and asked for a CUBIN
//! of the device's own architecture (`--gpu-architecture=sm_XY`), so that the driver loads machine code
//! and never JIT-compiles PTX. The decisions (which library, which arch, whether the driver can run what
//! NVRTC builds) are pure functions below; the calls into `libnvrtc` are a few symbols looked up in the
//! very library chosen (`dlopen` by path), so no other NVRTC on the loader's path can stand in for it.

use super::error::{CompileError, KernelEnvError};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A CUDA version, (major, minor): 13.0 is `CudaVersion(13, 0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion(pub i32, pub i32);

impl CudaVersion {
    /// `cuDriverGetVersion`'s integer: 13000 is 13.0, 12080 is 12.8.
    pub fn from_driver(v: i32) -> CudaVersion {
        CudaVersion(v / 1000, (v % 1000) / 10)
    }
}

impl std::fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, self.1)
    }
}

/// The real architecture NVRTC builds a CUBIN for, from a compute capability: (9, 0) is `sm_90`,
/// (8, 6) `sm_86`, (12, 0) `sm_120`.
pub fn sm_arch(major: i32, minor: i32) -> String {
    format!("sm_{}", major * 10 + minor)
}

/// Why a CUBIN built by NVRTC would not run on a device under its driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// NVRTC is of a newer CUDA than the driver runs: the code it builds would not load.
    #[error(
        "NVRTC is CUDA {nvrtc} but the NVIDIA driver runs CUDA {driver} at most: the code it builds would not load; install an NVIDIA driver for CUDA {}.x or later, or use a PyTorch built for CUDA {}.x (its NVRTC comes with it)",
        nvrtc.0,
        driver.0
    )]
    DriverTooOld {
        /// The CUDA version of the NVRTC found.
        nvrtc: CudaVersion,
        /// The newest CUDA version the driver runs.
        driver: CudaVersion,
    },
    /// NVRTC cannot build for this GPU's architecture.
    #[error(
        "NVRTC (CUDA {nvrtc}) cannot build for this GPU (compute capability {}.{}, sm_{arch}; it knows {known}), under the NVIDIA driver for CUDA {driver}: use a PyTorch whose CUDA supports this GPU (its NVRTC comes with it) and a driver for that CUDA",
        arch / 10,
        arch % 10
    )]
    Arch {
        /// The CUDA version of the NVRTC found.
        nvrtc: CudaVersion,
        /// The GPU's compute capability as `sm_XY` numbers it (90 for 9.0).
        arch: i32,
        /// The architectures that NVRTC can build for.
        known: String,
        /// The newest CUDA version the driver runs.
        driver: CudaVersion,
    },
}

/// Why an NVRTC library cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum OpenError {
    #[error("cannot load {path}: {why}")]
    Load { path: String, why: String },
    #[error("this libnvrtc has no symbol {0}")]
    Symbol(String),
    #[error("{path} does not answer {call}")]
    NoAnswer { path: String, call: &'static str },
}

/// Whether a CUBIN built by NVRTC `nvrtc` for `sm_{arch}` (`arch` = 10 × major + minor) runs under a driver
/// for CUDA `driver`, given the architectures that NVRTC knows (`nvrtcGetSupportedArchs`); the error names
/// both versions and the fix. A CUBIN of a newer minor version of the driver's major runs (CUDA's minor
/// version compatibility, which holds for machine code, not for PTX); a newer major does not.
pub fn check_build(driver: CudaVersion, nvrtc: CudaVersion, arch: i32, supported: &[i32]) -> Result<(), BuildError> {
    if nvrtc.0 > driver.0 {
        return Err(BuildError::DriverTooOld { nvrtc, driver });
    }
    if !supported.contains(&arch) {
        let known = match (supported.iter().min(), supported.iter().max()) {
            (Some(lo), Some(hi)) => format!("sm_{lo} to sm_{hi}"),
            _ => "no architecture".into(),
        };
        return Err(BuildError::Arch { nvrtc, arch, known, driver });
    }
    Ok(())
}

/// A `libnvrtc` file name's CUDA version: `libnvrtc.so.13` is (13, 0), `libnvrtc.so.12.4.127` (12, 4);
/// `None` for the builtins, the `.alt` builds and a name without a version (`libnvrtc.so`).
fn compiler_version(name: &str) -> Option<CudaVersion> {
    version_after(name, "libnvrtc.so.")
}

/// A `libnvrtc-builtins` file name's CUDA version: `libnvrtc-builtins.so.13.0` is (13, 0).
fn builtins_version(name: &str) -> Option<CudaVersion> {
    version_after(name, "libnvrtc-builtins.so.")
}

fn version_after(name: &str, prefix: &str) -> Option<CudaVersion> {
    let mut parts = name.strip_prefix(prefix)?.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = match parts.next() {
        Some(m) => m.parse().ok()?,
        None => 0,
    };
    Some(CudaVersion(major, minor))
}

/// The NVRTC to load: the compiler and the builtins it loads by name (same major version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvrtcChoice {
    /// The NVRTC library file (`libnvrtc.so.*`).
    pub compiler: PathBuf,
    /// Its builtins library (`libnvrtc-builtins.so.*`), when found beside it.
    pub builtins: Option<PathBuf>,
    /// The CUDA version of that NVRTC.
    pub version: CudaVersion,
}

/// The NVRTCs among `files` the driver runs (`driver`: its major version at least theirs; any without a
/// driver, where the build only compiles), highest CUDA version first, an equal version in the order of
/// `files` (beside the loaded libtorch before the venv before the system), each with the newest builtins
/// of its major version in its folder. The first that loads is the one used.
pub fn rank_nvrtc(files: &[PathBuf], driver: Option<CudaVersion>) -> Vec<NvrtcChoice> {
    let name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut ranked: Vec<NvrtcChoice> = files
        .iter()
        .filter_map(|f| compiler_version(&name(f)).map(|v| (v, f)))
        .filter(|(v, _)| driver.is_none_or(|d| v.0 <= d.0))
        .map(|(version, compiler)| {
            let builtins = files
                .iter()
                .filter(|b| b.parent() == compiler.parent())
                .filter_map(|b| builtins_version(&name(b)).filter(|v| v.0 == version.0).map(|v| (v, b)))
                .max_by_key(|(v, _)| *v)
                .map(|(_, b)| b.clone());
            NvrtcChoice { compiler: compiler.clone(), builtins, version }
        })
        .collect();
    ranked.sort_by_key(|c| std::cmp::Reverse(c.version));
    ranked.dedup();
    ranked
}

/// The `site-packages` folders of a venv (`lib/python3*/site-packages`).
fn venv_site_packages(venv: &Path) -> Vec<PathBuf> {
    let Ok(pys) = std::fs::read_dir(venv.join("lib")) else { return Vec::new() };
    let mut sites: Vec<PathBuf> = pys.flatten().map(|py| py.path().join("site-packages")).collect();
    sites.sort();
    sites
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

/// The `libnvrtc*` files in `site-packages/nvidia/*/lib` of each folder, folder by folder, each folder's
/// files sorted by name (the choice among them is by version, `choose_nvrtc`).
fn nvrtc_files(site_packages: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for site in site_packages {
        let Ok(pkgs) = std::fs::read_dir(site.join("nvidia")) else { continue };
        let mut here: Vec<PathBuf> = pkgs
            .flatten()
            .filter_map(|pkg| std::fs::read_dir(pkg.path().join("lib")).ok())
            .flat_map(|files| files.flatten().map(|f| f.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libnvrtc")))
            .collect();
        here.sort();
        found.extend(here.into_iter().filter(|p| !found.contains(p)).collect::<Vec<_>>());
    }
    found
}

/// The CUDA driver's version (`cuDriverGetVersion`), `None` without a driver.
pub fn driver_version() -> Option<CudaVersion> {
    // SAFETY: only tries dlopen on candidate names and closes what it opened.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    let mut v: c_int = 0;
    // SAFETY: the driver library is present (checked above); `v` is a valid out-pointer.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    (r == cudarc::driver::sys::CUresult::CUDA_SUCCESS).then(|| CudaVersion::from_driver(v))
}

type ProgramPtr = *mut c_void;
type Status = c_int;

/// The NVRTC symbols used, looked up in the library chosen.
struct Nvrtc {
    path: String,
    version: CudaVersion,
    archs: Vec<i32>,
    create: unsafe extern "C" fn(
        *mut ProgramPtr,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    compile: unsafe extern "C" fn(ProgramPtr, c_int, *const *const c_char) -> Status,
    destroy: unsafe extern "C" fn(*mut ProgramPtr) -> Status,
    log_size: unsafe extern "C" fn(ProgramPtr, *mut usize) -> Status,
    log: unsafe extern "C" fn(ProgramPtr, *mut c_char) -> Status,
    cubin_size: unsafe extern "C" fn(ProgramPtr, *mut usize) -> Status,
    cubin: unsafe extern "C" fn(ProgramPtr, *mut c_char) -> Status,
    ptx_size: unsafe extern "C" fn(ProgramPtr, *mut usize) -> Status,
    ptx: unsafe extern "C" fn(ProgramPtr, *mut c_char) -> Status,
}

/// `dlopen` (global: NVRTC finds its builtins by soname), the handle kept for the life of the process.
fn dlopen(path: &str) -> Result<*mut c_void, OpenError> {
    let load = |why: String| OpenError::Load { path: path.to_string(), why };
    let c = CString::new(path).map_err(|_| load("a NUL byte in the path".into()))?;
    // SAFETY: a valid NUL-terminated name; the handle is never closed.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if !h.is_null() {
        return Ok(h);
    }
    // SAFETY: dlerror's message (or null) describes the dlopen that just failed on this thread.
    let e = unsafe { libc::dlerror() };
    // SAFETY: a non-null dlerror result is a NUL-terminated string, read before any other dl call.
    let why = if e.is_null() { String::new() } else { unsafe { CStr::from_ptr(e) }.to_string_lossy().to_string() };
    Err(load(why))
}

/// Symbol `name` of library `lib` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the symbol's true C signature (a function pointer type).
unsafe fn symbol<F: Copy>(lib: *mut c_void, name: &CStr) -> Result<F, OpenError> {
    // SAFETY: `lib` is a live handle from dlopen and `name` NUL-terminated.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(OpenError::Symbol(name.to_string_lossy().into_owned()));
    }
    // SAFETY: a non-null symbol address, `F` its signature by the caller's promise; sizes agree (fn pointers).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

impl Nvrtc {
    /// Loads `choice` (builtins first) and reads its version and architectures.
    fn open(choice: &NvrtcChoice) -> Result<Nvrtc, OpenError> {
        if let Some(b) = &choice.builtins
            && let Err(e) = dlopen(&b.to_string_lossy())
        {
            log::debug!("NVRTC: {e}");
        }
        let path = choice.compiler.to_string_lossy().to_string();
        let lib = dlopen(&path)?;
        type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status;
        type CountFn = unsafe extern "C" fn(*mut c_int) -> Status;
        type ArchsFn = unsafe extern "C" fn(*mut c_int) -> Status;
        // SAFETY (each lookup): the signatures are NVRTC's (nvrtc.h).
        let (version_fn, count_fn, archs_fn): (VersionFn, CountFn, ArchsFn) = unsafe {
            (
                symbol(lib, c"nvrtcVersion")?,
                symbol(lib, c"nvrtcGetNumSupportedArchs")?,
                symbol(lib, c"nvrtcGetSupportedArchs")?,
            )
        };
        let (mut major, mut minor, mut n) = (0, 0, 0);
        // SAFETY: valid out-pointers.
        if unsafe { version_fn(&mut major, &mut minor) } != 0 || unsafe { count_fn(&mut n) } != 0 {
            return Err(OpenError::NoAnswer { path, call: "nvrtcVersion" });
        }
        let mut archs = vec![0; n.max(0) as usize];
        // SAFETY: `archs` holds the `n` ints nvrtcGetSupportedArchs writes.
        if unsafe { archs_fn(archs.as_mut_ptr()) } != 0 {
            return Err(OpenError::NoAnswer { path, call: "nvrtcGetSupportedArchs" });
        }
        // SAFETY (each lookup): as above.
        unsafe {
            Ok(Nvrtc {
                path,
                version: CudaVersion(major, minor),
                archs,
                create: symbol(lib, c"nvrtcCreateProgram")?,
                compile: symbol(lib, c"nvrtcCompileProgram")?,
                destroy: symbol(lib, c"nvrtcDestroyProgram")?,
                log_size: symbol(lib, c"nvrtcGetProgramLogSize")?,
                log: symbol(lib, c"nvrtcGetProgramLog")?,
                cubin_size: symbol(lib, c"nvrtcGetCUBINSize")?,
                cubin: symbol(lib, c"nvrtcGetCUBIN")?,
                ptx_size: symbol(lib, c"nvrtcGetPTXSize")?,
                ptx: symbol(lib, c"nvrtcGetPTX")?,
            })
        }
    }

    /// Compiles `source` with `options`; `cubin` picks the output (else PTX).
    fn build(&self, source: &str, name: &str, options: &[String], cubin: bool) -> Result<Vec<u8>, CompileError> {
        let nul = |what| CompileError::Nul { name: name.to_string(), what };
        let src = CString::new(source).map_err(|_| nul("the source"))?;
        let cname = CString::new(name).map_err(|_| nul("the name"))?;
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| nul("an NVRTC option"))?;
        let ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut prog: ProgramPtr = std::ptr::null_mut();
        // SAFETY: valid NUL-terminated strings alive for the program's life (until `destroy` below), no headers.
        let st =
            unsafe { (self.create)(&mut prog, src.as_ptr(), cname.as_ptr(), 0, std::ptr::null(), std::ptr::null()) };
        if st != 0 || prog.is_null() {
            return Err(CompileError::Create { name: name.to_string(), status: st });
        }
        let out = self.compile_program(prog, name, &ptrs, cubin);
        // SAFETY: `prog` came from nvrtcCreateProgram and is destroyed once.
        unsafe { (self.destroy)(&mut prog) };
        out
    }

    fn compile_program(
        &self,
        prog: ProgramPtr,
        name: &str,
        opts: &[*const c_char],
        cubin: bool,
    ) -> Result<Vec<u8>, CompileError> {
        // SAFETY: `prog` is live; `opts` holds `len` valid C strings.
        let st = unsafe { (self.compile)(prog, opts.len() as c_int, opts.as_ptr()) };
        if st != 0 {
            let mut n = 0usize;
            let mut log = Vec::new();
            // SAFETY: `prog` is live; `log` holds the `n` bytes the log takes.
            if unsafe { (self.log_size)(prog, &mut n) } == 0 {
                log = vec![0u8; n];
                // SAFETY: `log` holds the `n` bytes nvrtcGetProgramLogSize asked for.
                unsafe { (self.log)(prog, log.as_mut_ptr().cast()) };
            }
            let log = String::from_utf8_lossy(&log).trim_end_matches('\0').trim().to_string();
            return Err(CompileError::Refused { name: name.to_string(), status: st, log });
        }
        let (size_fn, get_fn) = if cubin { (self.cubin_size, self.cubin) } else { (self.ptx_size, self.ptx) };
        let mut n = 0usize;
        // SAFETY: `prog` is compiled; `out` holds the `n` bytes asked for.
        if unsafe { size_fn(prog, &mut n) } != 0 || n == 0 {
            let kind = if cubin { "CUBIN" } else { "PTX" };
            return Err(CompileError::NoOutput { name: name.to_string(), kind });
        }
        let mut out = vec![0u8; n];
        // SAFETY: as above.
        if unsafe { get_fn(prog, out.as_mut_ptr().cast()) } != 0 {
            return Err(CompileError::NoHandover { name: name.to_string() });
        }
        Ok(out)
    }
}

/// The process's NVRTC, loaded once: where it was looked for, in the error.
fn nvrtc() -> Result<&'static Nvrtc, KernelEnvError> {
    // The error: whether NVRTC was found but too new for the driver, and the message.
    static LIB: OnceLock<Result<Nvrtc, (bool, String)>> = OnceLock::new();
    LIB.get_or_init(|| {
        let driver = driver_version();
        let venv = crate::runtime_libs::pyenv_dir();
        let mut sites: Vec<PathBuf> = loaded_torch_site_packages().into_iter().collect();
        sites.extend(venv_site_packages(&venv));
        let mut files = nvrtc_files(&sites);
        // Last, the system's loader path (a CUDA toolkit), by soname, newest first.
        files.extend((9..=13).rev().map(|m| PathBuf::from(format!("libnvrtc.so.{m}"))));
        let mut why = Vec::new();
        let opened = rank_nvrtc(&files, driver).iter().find_map(|c| match Nvrtc::open(c) {
            Ok(n) => Some(n),
            Err(e) => {
                why.push(e);
                None
            }
        });
        if let Some(n) = opened {
            log::debug!("NVRTC {} from {}", n.version, n.path);
            return Ok(n);
        }
        match too_new(&files, driver) {
            Some(e) => Err((true, e)),
            None => {
                // The system's names that did not load are not news; what did load and failed is.
                let why: Vec<String> = why
                    .into_iter()
                    .filter(|w| !matches!(w, OpenError::Load { path, .. } if path.starts_with("libnvrtc.so.")))
                    .map(|w| w.to_string())
                    .collect();
                let mut looked: Vec<String> = sites.iter().map(|s| format!("{}/nvidia/*/lib", s.display())).collect();
                looked.push("the system's library path".into());
                let driver = driver.map(|d| format!("; the driver runs CUDA {d}")).unwrap_or_default();
                let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) };
                Err((false, format!("{}{driver}{why}", looked.join(", "))))
            }
        }
    })
    .as_ref()
    .map_err(
        |(too_new, e)| {
            if *too_new { KernelEnvError::Unbuildable(e.clone()) } else { KernelEnvError::NoNvrtc(e.clone()) }
        },
    )
}

/// Where the only NVRTCs found (files, not the system's names) are of a CUDA major version above the
/// driver's: the message naming both versions and the fix.
pub fn too_new(files: &[PathBuf], driver: Option<CudaVersion>) -> Option<String> {
    let d = driver?;
    let newest = rank_nvrtc(files, None).into_iter().find(|c| c.compiler.is_absolute())?;
    if newest.version.0 <= d.0 {
        return None;
    }
    // The version check comes first: with no architecture asked for, it is the one that fails.
    check_build(d, newest.version, 0, &[]).err().map(|e| format!("{e} ({})", newest.compiler.display()))
}

/// Makes sure NVRTC loads (once per process); its CUDA version and where it came from.
pub fn loaded() -> Result<(CudaVersion, String), KernelEnvError> {
    nvrtc().map(|n| (n.version, n.path.clone()))
}

/// `source` compiled to a CUBIN for `arch` (`sm_XY`), FMA contraction off. No GPU needed.
pub fn compile_cubin(source: &str, name: &str, arch: &str) -> Result<Vec<u8>, KernelEnvError> {
    let opts = ["--fmad=false".to_string(), format!("--gpu-architecture={arch}")];
    Ok(nvrtc()?.build(source, name, &opts, true)?)
}

/// `source` compiled to PTX (for reading what NVRTC generates; the device gets a CUBIN), FMA
/// contraction off unless `fmad`.
pub fn compile_ptx(source: &str, name: &str, fmad: bool) -> Result<String, KernelEnvError> {
    let opts = [format!("--fmad={fmad}")];
    let ptx = nvrtc()?.build(source, name, &opts, false)?;
    Ok(String::from_utf8_lossy(&ptx).trim_end_matches('\0').to_string())
}

/// The CUBIN of `source` for a device of compute capability (`major`, `minor`) under a driver for CUDA
/// `driver`: refused with both versions named when the driver could not load it or NVRTC cannot build it.
pub fn compile_for_device(
    source: &str,
    name: &str,
    driver: CudaVersion,
    (major, minor): (i32, i32),
) -> Result<Vec<u8>, KernelEnvError> {
    let n = nvrtc()?;
    check_build(driver, n.version, major * 10 + minor, &n.archs)
        .map_err(|e| KernelEnvError::Unbuildable(format!("{e} (NVRTC: {})", n.path)))?;
    compile_cubin(source, name, &sm_arch(major, minor))
}

#[cfg(test)]
mod tests;
