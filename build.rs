//! Records where libtorch and the project's Python venv are, so the binary runs without
//! LD_LIBRARY_PATH: an rpath to libtorch's lib directory (when the `train` feature links it), and the
//! venv path for finding ONNX Runtime at run time. Also compiles the environment kernel for the CPU.

use std::path::PathBuf;

fn main() {
    // The environment kernel's CPU build (the same source NVRTC compiles for CUDA at run time): no FMA
    // contraction, no fast math, so it agrees bit for bit with `env::VecEnv`.
    kernel("src/env/kernel/env_step.c", "tradebot_env_kernel");
    // GAE's reverse scan (rl::ppo::gae), the same way.
    kernel("src/rl/ppo/gae.c", "tradebot_gae_kernel");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=TRADEBOT_PYENV");
    if let Some(venv) = std::env::var_os("TRADEBOT_PYENV") {
        println!("cargo:rustc-env=TRADEBOT_BUILD_PYENV={}", PathBuf::from(venv).display());
    }
    if std::env::var_os("CARGO_FEATURE_TRAIN").is_none() {
        return;
    }
    if let Some(libtorch) = std::env::var_os("LIBTORCH") {
        let lib = PathBuf::from(libtorch).join("lib");
        // RUNPATH: LD_LIBRARY_PATH still wins, so a GPU machine can point the same binary at its own libtorch.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
}

/// A kernel source's CPU build (NVRTC compiles the same file for CUDA at run time): C11, no FMA
/// contraction, no fast math, warnings as errors.
fn kernel(file: &str, lib: &str) {
    println!("cargo:rerun-if-changed={file}");
    cc::Build::new()
        .file(file)
        .std("c11")
        .opt_level(3)
        .flag("-ffp-contract=off")
        .flag_if_supported("-fno-fast-math")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile(lib);
}
