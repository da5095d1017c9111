//! Records where libtorch and the project's Python venv are, so the binary runs without
//! LD_LIBRARY_PATH: an rpath to libtorch's lib directory (when the `train` feature links it), and the
//! venv path for finding ONNX Runtime at run time. Also compiles the environment kernel for the CPU, and
//! bundles the dashboard's charting library (`make chart-assets` fetches it) when it is there.

use std::path::PathBuf;

fn main() {
    // The environment kernel's CPU build (the same source NVRTC compiles for CUDA at run time): no FMA
    // contraction, no fast math, so it agrees bit for bit with `env::VecEnv`.
    kernel("src/env/kernel/env_step.c", "tradebot_env_kernel");
    // GAE's reverse scan (rl::ppo::gae), the same way.
    kernel("src/rl/ppo/gae.c", "tradebot_gae_kernel");
    charts();
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

/// The dashboard's charting library, `assets/vendor/lightweight-charts.js` (TradingView Lightweight
/// Charts, Apache-2.0, put there by `make chart-assets` from PyPI), copied into OUT_DIR for
/// `include_str!`. Without it the build goes on with an empty file: the dashboard then says that the
/// charts are unavailable and how to get them.
fn charts() {
    let dir = PathBuf::from("assets/vendor");
    let file = dir.join("lightweight-charts.js");
    // The folder is tracked (its .gitignore), so this sees the file appear.
    println!("cargo:rerun-if-changed={}", dir.display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("lightweight-charts.js");
    let text = match std::fs::read_to_string(&file) {
        Ok(t) if t.contains("TradingView Lightweight Charts") => t,
        Ok(_) => {
            panic!("{} is not TradingView Lightweight Charts: delete it and run `make chart-assets`", file.display())
        }
        Err(_) => {
            println!(
                "cargo:warning=no {}: the dashboard is built without charts (run `make chart-assets`, then build again)",
                file.display()
            );
            String::new()
        }
    };
    if std::fs::read_to_string(&out).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(&out, text).expect("writing the charting library into OUT_DIR");
    }
}
