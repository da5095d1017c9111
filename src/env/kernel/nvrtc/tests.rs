use super::*;

#[test]
fn the_arch_is_the_devices_compute_capability() {
    assert_eq!(sm_arch(9, 0), "sm_90"); // H100, H200
    assert_eq!(sm_arch(8, 0), "sm_80"); // A100
    assert_eq!(sm_arch(8, 6), "sm_86"); // RTX 3070
    assert_eq!(sm_arch(8, 9), "sm_89"); // RTX 4080
    assert_eq!(sm_arch(10, 0), "sm_100"); // B200
    assert_eq!(sm_arch(12, 0), "sm_120"); // RTX 5090
    assert_eq!(CudaVersion::from_driver(13000), CudaVersion(13, 0));
    assert_eq!(CudaVersion::from_driver(12080), CudaVersion(12, 8));
    assert_eq!(CudaVersion::from_driver(11040).to_string(), "11.4");
}

#[test]
fn a_build_runs_under_a_driver_of_its_major_version_or_later_for_an_arch_nvrtc_knows() {
    let archs = [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121];
    assert_eq!(check_build(CudaVersion(13, 0), CudaVersion(13, 0), 90, &archs), Ok(()));
    assert_eq!(check_build(CudaVersion(13, 1), CudaVersion(12, 8), 86, &archs), Ok(()));
    // A CUBIN of a newer minor version loads (minor version compatibility holds for machine code).
    assert_eq!(check_build(CudaVersion(13, 0), CudaVersion(13, 2), 90, &archs), Ok(()));
    // A driver for CUDA 12.8 under torch's CUDA 13 NVRTC: both versions and the fix named.
    let err = check_build(CudaVersion(12, 8), CudaVersion(13, 0), 90, &archs).unwrap_err().to_string();
    assert!(err.contains("NVRTC is CUDA 13.0") && err.contains("runs CUDA 12.8 at most"), "{err}");
    assert!(
        err.contains("install an NVIDIA driver for CUDA 13.x") && err.contains("PyTorch built for CUDA 12.x"),
        "{err}"
    );
    // A Kepler under CUDA 13, which dropped it.
    let err = check_build(CudaVersion(13, 0), CudaVersion(13, 0), 35, &archs).unwrap_err().to_string();
    assert!(err.contains("compute capability 3.5, sm_35") && err.contains("it knows sm_75 to sm_121"), "{err}");
    assert!(err.contains("NVRTC (CUDA 13.0)") && err.contains("driver for CUDA 13.0"), "{err}");
}

fn paths(names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(PathBuf::from).collect()
}

/// The NVRTC by its version (the highest the driver runs), not by the order of folders or names: the
/// lexicographic order puts `libnvrtc.so.9` after `libnvrtc.so.12`, and `cu13` after `cu12` whatever
/// the driver runs.
#[test]
fn nvrtc_is_chosen_by_version_among_those_the_driver_runs() {
    let files = paths(&[
        "/torch/nvidia/cu12/lib/libnvrtc-builtins.so.12.8",
        "/torch/nvidia/cu12/lib/libnvrtc-builtins.so.12.4",
        "/torch/nvidia/cu12/lib/libnvrtc.so.12",
        "/torch/nvidia/cu13/lib/libnvrtc-builtins.alt.so.13.0",
        "/torch/nvidia/cu13/lib/libnvrtc-builtins.so.13.0",
        "/torch/nvidia/cu13/lib/libnvrtc.alt.so.13",
        "/torch/nvidia/cu13/lib/libnvrtc.so.13",
        "/old/nvidia/cuda_nvrtc/lib/libnvrtc.so.9",
        "/old/nvidia/cuda_nvrtc/lib/libnvrtc.so",
    ]);
    let first = |driver| rank_nvrtc(&files, driver).into_iter().next();
    let cu13 =
        NvrtcChoice { compiler: files[6].clone(), builtins: Some(files[4].clone()), version: CudaVersion(13, 0) };
    assert_eq!(first(Some(CudaVersion(13, 0))), Some(cu13.clone()));
    assert_eq!(first(None), Some(cu13), "without a driver (CI), the newest compiles");
    let cu12 =
        NvrtcChoice { compiler: files[2].clone(), builtins: Some(files[0].clone()), version: CudaVersion(12, 0) };
    assert_eq!(first(Some(CudaVersion(12, 8))), Some(cu12));
    let ranked = rank_nvrtc(&files, Some(CudaVersion(12, 2)));
    assert_eq!(ranked.iter().map(|c| c.version.0).collect::<Vec<_>>(), [12, 9], "newest first, 9 after 12");
    assert_eq!(rank_nvrtc(&files, Some(CudaVersion(8, 0))), vec![], "nothing the driver runs");
    // Only torch's CUDA 13 NVRTC under a CUDA 12 driver: that, not "no NVRTC", is the error.
    let cu13_only = paths(&["/torch/nvidia/cu13/lib/libnvrtc.so.13", "libnvrtc.so.12"]);
    assert_eq!(rank_nvrtc(&cu13_only, Some(CudaVersion(12, 8))).len(), 1, "the system's name is still tried");
    let err = too_new(&cu13_only, Some(CudaVersion(12, 8))).expect("too new");
    assert!(
        err.contains("NVRTC is CUDA 13.0") && err.contains("runs CUDA 12.8") && err.contains("/torch/nvidia/cu13"),
        "{err}"
    );
    assert_eq!(too_new(&cu13_only, Some(CudaVersion(13, 0))), None);
    assert_eq!(too_new(&cu13_only, None), None);
    // An equal version: the one found first (beside the loaded libtorch) wins; a toolkit's full version
    // (libnvrtc.so.12.4.127) counts its minor.
    let tie = paths(&["/loaded/libnvrtc.so.13", "/venv/libnvrtc.so.13", "/tk/libnvrtc.so.12.4.127", "libnvrtc.so.13"]);
    let ranked = rank_nvrtc(&tie, None);
    assert_eq!(
        ranked.iter().map(|c| c.compiler.clone()).collect::<Vec<_>>(),
        [&tie[0], &tie[1], &tie[3], &tie[2]].map(Clone::clone)
    );
    assert_eq!(ranked[2].builtins, None, "a system NVRTC finds its builtins itself");
    assert_eq!(ranked[3].version, CudaVersion(12, 4));
}

/// A GPU machine's own PyTorch: NVRTC is looked for beside the libtorch the process loaded.
#[test]
fn nvrtc_is_found_beside_the_loaded_libtorch() {
    let maps = "7f00-7f01 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libc.so.6\n\
                7f02-7f03 r-xp 00000000 08:01 43 /opt/py/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so\n";
    assert_eq!(site_packages_in_maps(maps), Some(PathBuf::from("/opt/py/lib/python3.12/site-packages")));
    assert_eq!(site_packages_in_maps("7f00-7f01 r-xp 0 0 0 /lib/libc.so.6\n"), None);
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("nvidia/cu13/lib");
    std::fs::create_dir_all(&lib).unwrap();
    for f in ["libnvrtc.so.13", "libnvrtc-builtins.so.13.0", "libcublas.so.13", "libnvrtc.alt.so.13"] {
        std::fs::write(lib.join(f), b"").unwrap();
    }
    let files = nvrtc_files(&[dir.path().to_path_buf(), dir.path().to_path_buf()]);
    assert_eq!(files.len(), 3, "{files:?}");
    let chosen = rank_nvrtc(&files, None).into_iter().next().unwrap();
    assert_eq!(
        (chosen.compiler, chosen.builtins),
        (lib.join("libnvrtc.so.13"), Some(lib.join("libnvrtc-builtins.so.13.0")))
    );
    // This very process loaded the venv's libtorch: its site-packages is found the same way, and the
    // NVRTC loaded is the one beside it.
    let _ = tch::Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
    let here = loaded_torch_site_packages().expect("libtorch_cpu.so is mapped in the test process");
    assert!(here.join("torch").is_dir(), "{}", here.display());
    let (version, path) = loaded().unwrap_or_else(|e| panic!("{e}"));
    assert!(path.starts_with(&*here.to_string_lossy()), "NVRTC {version} from {path}, not beside {}", here.display());
    assert!(version >= CudaVersion(12, 0), "{version}");
}
