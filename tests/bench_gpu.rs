//! `tradebot bench gpu` (issue 20): its plan is valid `tradebot` command lines on CUDA, and where no GPU
//! is usable (CI) it prints "no GPU" and exits 1; on a machine with an NVIDIA driver it runs the quick plan.
#![cfg(feature = "train")]

mod common;

use clap::Parser;
use common::{text, tradebot};

#[test]
fn the_gpu_plan_is_valid_commands_on_cuda() {
    let plan = tradebot::bench::gpu::plan(false);
    assert_eq!(plan.len(), 7);
    for (name, args) in plan {
        let argv = std::iter::once("tradebot".to_string()).chain(args.iter().cloned());
        let cli = tradebot::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(format!("{:?}", cli.command).contains("\"cuda\""), "{name}: {args:?}");
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
