//! `tradebot bench gpu` (issue 20): its plan is valid `tradebot` command lines on CUDA, and where no GPU
//! is usable (CI) it prints "no GPU" and exits 1; on a machine with an NVIDIA driver it runs the quick plan.
//! `scripts/gpu-check.sh` (`make gpu-check`, issue 33), on a kit of stubs: it stops at doctor without a GPU,
//! runs every step with one, and its exit status and results file say which step failed.
#![cfg(feature = "train")]

mod common;

use clap::Parser;
use common::{text, tradebot};
use std::process::Output;

#[test]
fn the_gpu_plan_is_valid_commands_on_cuda() {
    let plan = tradebot::bench::gpu::plan(false);
    // Every kind of work the GPU figures cover is in the plan, each step under a name of its own.
    let names: std::collections::BTreeSet<&str> = plan.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), plan.len(), "two steps share a name: {names:?}");
    for kind in ["env", "ppo", "tune", "lstm"] {
        assert!(plan.iter().any(|(_, a)| a[1] == kind), "no bench {kind} in the plan: {names:?}");
    }
    for (name, args) in plan {
        let argv = std::iter::once("tradebot".to_string()).chain(args.iter().cloned());
        let cli = tradebot::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The device is parsed by clap: every step runs on CUDA device 0.
        assert!(format!("{:?}", cli.command).contains("device: Cuda(0)"), "{name}: {args:?}");
        assert!(args.contains(&"--json".to_string()), "{name}");
        // The large preset trains in bfloat16 autocast (issue 20), the small one in float32.
        let amp = args.contains(&"--mixed-precision".to_string());
        assert_eq!(amp, name.contains("2048"), "{name}: {args:?}");
    }
}

#[test]
fn bench_gpu_says_no_gpu_and_exits_1_without_one() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        let o = tradebot(&["bench", "gpu", "--quick", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        return;
    }
    let o = tradebot(&["bench", "gpu"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no GPU"), "{}", text(&o));
}

/// A kit of stubs for `scripts/gpu-check.sh`: a Python whose torch lib is a folder with an (empty)
/// libtorch_cpu.so, a `tradebot` whose doctor exits `doctor_rc` saying `doctor_says` and whose bench
/// passes, and a GPU test binary that exits `tests_rc` and leaves a mark. Returns the script's output.
fn run_gpu_check_on_stubs(kit: &std::path::Path, doctor_rc: i32, doctor_says: &str, tests_rc: i32) -> Output {
    use std::os::unix::fs::PermissionsExt;
    let lib = kit.join("torch/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("libtorch_cpu.so"), b"").unwrap();
    let exe = |name: &str, body: String| {
        let p = kit.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe(
        "python",
        format!("case \"$2\" in *torch.__file__*) echo LD_LIBRARY_PATH={};; *) exit 1;; esac", lib.display()),
    );
    exe("tradebot", format!("[ \"$1\" = doctor ] && {{ echo '{doctor_says}'; exit {doctor_rc}; }}\necho bench ran"));
    let summary = if tests_rc == 0 { "ok. 2 passed; 0 failed" } else { "FAILED. 1 passed; 1 failed" };
    exe("tradebot-gpu-tests", format!("touch tests-ran\necho 'test result: {summary}'; exit {tests_rc}"));
    std::fs::copy(common::root().join("scripts/gpu-check.sh"), kit.join("gpu-check.sh")).unwrap();
    // A process that another test's thread forks while this thread writes the script holds the written
    // file open until it execs, and running the script in that moment fails with "Text file busy"
    // (ETXTBSY): tried again, for up to a second.
    for _ in 0..50 {
        match std::process::Command::new(kit.join("gpu-check.sh")).env("PEER_PYTHON", kit.join("python")).output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            o => return o.unwrap(),
        }
    }
    panic!("gpu-check.sh stayed busy (ETXTBSY) for a second")
}

/// The GPU check on a machine without a GPU stops at doctor ("no GPU"), exits 1 within seconds, runs
/// neither the tests nor the bench, and its results file says so.
#[test]
fn gpu_check_stops_at_doctor_without_a_gpu_and_exits_1() {
    let kit = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let o = run_gpu_check_on_stubs(kit.path(), 1, "no GPU: no NVIDIA driver", 0);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    assert!(text(&o).contains("no GPU: no NVIDIA driver"), "{}", text(&o));
    assert!(!kit.path().join("tests-ran").exists(), "the GPU tests ran after doctor failed");
    let results = std::fs::read_to_string(kit.path().join("gpu-check-results.md")).unwrap();
    assert!(results.contains("| PyTorch |") && results.contains("| ok |"), "{results}");
    assert!(results.contains("| doctor | `./tradebot doctor --gpu` | **failed** (exit 1): no GPU"), "{results}");
    assert!(!results.contains("GPU tests") && results.contains("**a step failed**"), "{results}");
}

/// With a GPU, every step runs: a failed test fails the check (exit 1) but the bench still runs, and
/// the results file has each step with its time.
#[test]
fn gpu_check_runs_every_step_and_fails_when_a_test_fails() {
    let kit = tempfile::tempdir().unwrap();
    let o = run_gpu_check_on_stubs(kit.path(), 0, "GPU 0: a stub", 101);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(kit.path().join("tests-ran").exists(), "the GPU tests did not run");
    assert!(text(&o).contains("bench ran"), "{}", text(&o));
    let results = std::fs::read_to_string(kit.path().join("gpu-check-results.md")).unwrap();
    let row = results.lines().find(|l| l.starts_with("| GPU tests |")).unwrap_or_else(|| panic!("{results}"));
    assert!(row.contains("**failed** (exit 101)") && row.contains("1 failed"), "{row}");
    let bench = results.lines().find(|l| l.starts_with("| bench gpu --quick |")).unwrap_or_else(|| panic!("{results}"));
    assert!(bench.contains("| ok |") && bench.ends_with(" s |"), "{bench}");
    let o = run_gpu_check_on_stubs(kit.path(), 0, "GPU 0: a stub", 0);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let results = std::fs::read_to_string(kit.path().join("gpu-check-results.md")).unwrap();
    assert!(results.contains("every step passed"), "{results}");
}
