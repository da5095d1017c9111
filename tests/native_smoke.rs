//! Proves the native libraries are really used: ONNX Runtime runs a small model and returns the numbers
//! the same arithmetic gives in Rust; a few steps of training a small tch network lower its loss.

use std::path::Path;

#[test]
fn onnxruntime_runs_a_small_model_exactly() {
    let rt = tradebot::init_onnxruntime(None).expect("ONNX Runtime must load (run `make venv`)");
    assert!(rt.path.to_string_lossy().contains("onnxruntime"), "{}", rt.path.display());
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny_gemm.onnx");
    let mut session = ort::session::Session::builder(&rt.env)
        .unwrap()
        .with_intra_threads(1)
        .unwrap()
        .commit_from_file(&model)
        .unwrap();
    let w = [[0.5f32, -1.0], [0.25, 2.0], [-0.75, 0.125]];
    let b = [0.1f32, -0.2];
    let x = ndarray::arr2(&[[1.0f32, 2.0, 3.0], [-0.5, 0.0, 4.0], [0.0, 0.0, 0.0]]);
    let input = ort::value::TensorRef::from_array_view(x.view()).unwrap();
    let outputs = session.run(ort::inputs!["x" => input]).unwrap();
    let y = outputs["y"].try_extract_array::<f32>().unwrap();
    assert_eq!(y.shape(), &[3, 2]);
    for r in 0..3 {
        for c in 0..2 {
            let z: f32 = (0..3).map(|k| x[[r, k]] * w[k][c]).sum::<f32>() + b[c];
            assert!((y[[r, c]] - z.tanh()).abs() < 1e-6, "row {r} col {c}: ort {} vs {}", y[[r, c]], z.tanh());
        }
    }
}

#[cfg(feature = "train")]
#[test]
fn libtorch_training_lowers_the_loss() {
    use tch::nn::{self, Module, OptimizerConfig};
    tch::manual_seed(7);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let net = nn::seq()
        .add(nn::linear(vs.root() / "l1", 4, 16, Default::default()))
        .add_fn(|x| x.tanh())
        .add(nn::linear(vs.root() / "l2", 16, 1, Default::default()));
    let x = tch::Tensor::randn([256, 4], (tch::Kind::Float, tch::Device::Cpu));
    let target = (x.narrow(1, 0, 1) * 2.0 - x.narrow(1, 1, 1) * 0.5 + 0.3).tanh();
    let mut opt = nn::Adam::default().build(&vs, 1e-2).unwrap();
    let loss = |net: &nn::Sequential| net.forward(&x).mse_loss(&target, tch::Reduction::Mean);
    let initial = loss(&net).double_value(&[]);
    for _ in 0..200 {
        opt.backward_step(&loss(&net));
    }
    let fin = loss(&net).double_value(&[]);
    assert!(fin < initial * 0.1, "loss {initial} -> {fin}");
}
