//! Exported graphs against the reference forward passes, through the real ONNX Runtime, and through
//! the official `onnx.checker` (the venv's Python, installed by `make venv`).

use super::lstm::{LstmClassifier, LstmLayer};
use super::mlp::{MlpPolicy, ObsNorm, Squash};
use super::*;
use ort::session::Session;
use ort::value::TensorRef;

/// A small deterministic generator (xorshift64*), uniform in [-a, a).
struct Rng(u64);

impl Rng {
    fn next(&mut self, a: f32) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
        (u * 2.0 - 1.0) * a
    }

    fn vec(&mut self, n: usize, a: f32) -> Vec<f32> {
        (0..n).map(|_| self.next(a)).collect()
    }

    fn dense(&mut self, i: usize, o: usize) -> Dense {
        let a = 1.0 / (i as f32).sqrt();
        Dense { in_dim: i, out_dim: o, weight: self.vec(i * o, a), bias: self.vec(o, a) }
    }

    fn lstm(&mut self, i: usize, h: usize) -> LstmLayer {
        let a = 1.0 / (h as f32).sqrt();
        LstmLayer {
            input_size: i,
            hidden: h,
            w_ih: self.vec(4 * h * i, a),
            w_hh: self.vec(4 * h * h, a),
            b_ih: self.vec(4 * h, a),
            b_hh: self.vec(4 * h, a),
        }
    }
}

fn session(bytes: &[u8]) -> Session {
    let rt = crate::runtime_libs::init_onnxruntime(None).expect("ONNX Runtime (make venv)");
    Session::builder(&rt.env).unwrap().with_intra_threads(1).unwrap().commit_from_memory(bytes).unwrap()
}

fn onnx_checker(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.onnx");
    std::fs::write(&path, bytes).unwrap();
    let out = std::process::Command::new(crate::runtime_libs::pyenv_python())
        .args(["-c", "import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True); print('ok')"])
        .arg(&path)
        .output()
        .expect("the venv python runs (make venv)");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "onnx.checker refused the model:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn policy(rng: &mut Rng, obs: usize, hidden: &[usize], act: usize) -> MlpPolicy {
    let mut layers = Vec::new();
    let mut d = obs;
    for &h in hidden {
        layers.push(rng.dense(d, h));
        d = h;
    }
    MlpPolicy {
        norm: Some(ObsNorm {
            mean: rng.vec(obs, 2.0),
            var: rng.vec(obs, 1.0).into_iter().map(|v| v.abs() + 0.01).collect(),
            eps: 1e-8,
            clip: 5.0,
        }),
        hidden: layers,
        activation: Activation::Tanh,
        head: rng.dense(d, act),
        squash: Squash::Clip(1.0),
    }
}

#[test]
fn mlp_policy_matches_reference_on_1000_observations() {
    let mut rng = Rng(0x5eed);
    let p = policy(&mut rng, 17, &[64, 32], 5);
    let bytes = p.to_onnx("obs", "action", &[("model_id", "test")]).unwrap();
    onnx_checker(&bytes);
    let mut s = session(&bytes);
    let n = 1000;
    let obs: Vec<f32> = rng.vec(n * 17, 8.0);
    let x = ndarray::Array2::from_shape_vec((n, 17), obs.clone()).unwrap();
    let out = s.run(ort::inputs!["obs" => TensorRef::from_array_view(x.view()).unwrap()]).unwrap();
    let y = out["action"].try_extract_array::<f32>().unwrap();
    assert_eq!(y.shape(), &[n, 5]);
    let mut saturated = 0;
    for r in 0..n {
        let want = p.forward(&obs[r * 17..(r + 1) * 17]);
        for (c, w) in want.iter().enumerate() {
            assert!((y[[r, c]] - w).abs() <= 1e-5, "row {r} col {c}: ort {} vs {w}", y[[r, c]]);
            assert!((-1.0..=1.0).contains(&y[[r, c]]));
            saturated += usize::from(w.abs() == 1.0);
        }
    }
    assert!(saturated < n * 5, "every action saturated: the test would not see the layers");
}

#[test]
fn relu_policy_without_norm_or_clip() {
    let mut rng = Rng(7);
    let mut p = policy(&mut rng, 4, &[8], 2);
    p.norm = None;
    p.squash = Squash::Identity;
    p.activation = Activation::Relu;
    let bytes = p.to_onnx("x", "y", &[]).unwrap();
    onnx_checker(&bytes);
    let mut s = session(&bytes);
    let obs = rng.vec(4 * 3, 3.0);
    let x = ndarray::Array2::from_shape_vec((3, 4), obs.clone()).unwrap();
    let out = s.run(ort::inputs!["x" => TensorRef::from_array_view(x.view()).unwrap()]).unwrap();
    let y = out["y"].try_extract_array::<f32>().unwrap();
    for r in 0..3 {
        for (c, w) in p.forward(&obs[r * 4..r * 4 + 4]).iter().enumerate() {
            assert!((y[[r, c]] - w).abs() <= 1e-5);
        }
    }
}

#[test]
fn lstm_classifier_matches_reference() {
    let mut rng = Rng(42);
    let (fl, fi, sl, si, ctx) = (12, 5, 6, 4, 7);
    let mut last = rng.dense(16, 3);
    last.weight.iter_mut().for_each(|w| *w *= 4.0);
    let m = LstmClassifier {
        fast: rng.lstm(fi, 16),
        fast_len: fl,
        slow: rng.lstm(si, 8),
        slow_len: sl,
        context: vec![rng.dense(ctx, 8)],
        context_dim: ctx,
        head: vec![rng.dense(16 + 8 + 8, 16), last],
        activation: Activation::Relu,
    };
    let bytes = m.to_onnx(&[("kind", "lstm")]).unwrap();
    onnx_checker(&bytes);
    let mut s = session(&bytes);
    let n = 200;
    let xf = rng.vec(n * fl * fi, 2.0);
    let xs = rng.vec(n * sl * si, 2.0);
    let xc = rng.vec(n * ctx, 2.0);
    let af = ndarray::Array3::from_shape_vec((n, fl, fi), xf.clone()).unwrap();
    let as_ = ndarray::Array3::from_shape_vec((n, sl, si), xs.clone()).unwrap();
    let ac = ndarray::Array2::from_shape_vec((n, ctx), xc.clone()).unwrap();
    let out = s
        .run(ort::inputs![
            "x_fast" => TensorRef::from_array_view(af.view()).unwrap(),
            "x_slow" => TensorRef::from_array_view(as_.view()).unwrap(),
            "x_context" => TensorRef::from_array_view(ac.view()).unwrap(),
        ])
        .unwrap();
    let p = out["probs"].try_extract_array::<f32>().unwrap();
    assert_eq!(p.shape(), &[n, 3]);
    let (mut lo, mut hi) = (f32::MAX, f32::MIN);
    for r in 0..n {
        let want = m.forward(
            &xf[r * fl * fi..(r + 1) * fl * fi],
            &xs[r * sl * si..(r + 1) * sl * si],
            &xc[r * ctx..(r + 1) * ctx],
        );
        for c in 0..3 {
            assert!((p[[r, c]] - want[c]).abs() <= 1e-5, "row {r} class {c}: ort {} vs {}", p[[r, c]], want[c]);
        }
        assert!((want.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        (lo, hi) = (lo.min(want[0]), hi.max(want[0]));
    }
    assert!(hi - lo > 0.05, "P(down) spans only [{lo}, {hi}]: the inputs barely reach the output");
}

#[test]
fn gate_order_matters() {
    // Swapping PyTorch's f and g blocks must change the output: proves the reorder is exercised.
    let mut rng = Rng(9);
    let l = rng.lstm(3, 4);
    let seq = rng.vec(5 * 3, 1.0);
    let mut swapped = l.clone();
    let blk = 4 * 3;
    let (f, g) = (swapped.w_ih[blk..2 * blk].to_vec(), swapped.w_ih[2 * blk..3 * blk].to_vec());
    swapped.w_ih[blk..2 * blk].copy_from_slice(&g);
    swapped.w_ih[2 * blk..3 * blk].copy_from_slice(&f);
    assert_ne!(l.forward_last(&seq), swapped.forward_last(&seq));
}

#[test]
fn bad_weights_are_refused() {
    let mut rng = Rng(1);
    let mut p = policy(&mut rng, 3, &[4], 1);
    p.hidden[0].weight[2] = f32::NAN;
    assert!(matches!(p.to_onnx("o", "a", &[]), Err(OnnxError::NotFinite(_))));
    let mut p = policy(&mut rng, 3, &[4], 1);
    p.head.in_dim = 5;
    assert!(matches!(p.to_onnx("o", "a", &[]), Err(OnnxError::Shape(_))));
}

#[test]
fn tanh_squash_matches_reference_and_never_leaves_the_unit_box() {
    let mut rng = Rng(0x7a);
    let mut p = policy(&mut rng, 6, &[16], 3);
    p.squash = Squash::Tanh;
    let bytes = p.to_onnx("obs", "action", &[]).unwrap();
    onnx_checker(&bytes);
    let mut s = session(&bytes);
    let n = 200;
    let obs = rng.vec(n * 6, 8.0);
    let x = ndarray::Array2::from_shape_vec((n, 6), obs.clone()).unwrap();
    let out = s.run(ort::inputs!["obs" => TensorRef::from_array_view(x.view()).unwrap()]).unwrap();
    let y = out["action"].try_extract_array::<f32>().unwrap();
    let mut inside = 0;
    for r in 0..n {
        let mut raw = p.clone();
        raw.squash = Squash::Identity;
        let pre = raw.forward(&obs[r * 6..(r + 1) * 6]);
        for (c, w) in p.forward(&obs[r * 6..(r + 1) * 6]).iter().enumerate() {
            assert!((y[[r, c]] - w).abs() <= 1e-5, "row {r} col {c}: ort {} vs {w}", y[[r, c]]);
            assert!((w - pre[c].tanh()).abs() <= 1e-6, "the reference squash is not tanh");
            inside += usize::from(w.abs() < 0.99);
        }
    }
    assert!(inside > 0, "every action saturated: the test would not see tanh");
}
