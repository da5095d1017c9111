use super::dataset::{WindowDataset, chronological_split, synthetic};
use super::model::NetDims;
use super::train::LstmTrainer;
use super::*;
use tch::{Device, Kind, Tensor};

/// The small network the LSTM tests train (the GPU test's too).
pub(crate) fn dims() -> NetDims {
    NetDims { fast_dim: 4, fast_len: 16, slow_dim: 4, slow_len: 4, context_dim: 3 }
}

/// The training settings of the LSTM tests (the GPU test's too).
pub(crate) fn cfg() -> LstmConfig {
    LstmConfig {
        fast_hidden: 16,
        slow_hidden: 8,
        context_hidden: vec![8],
        head_hidden: vec![16],
        batch_size: 256,
        max_epochs: 40,
        learning_rate: 3e-3,
        patience: 6,
        seed: 3,
        ..Default::default()
    }
}

fn split(n: usize) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    chronological_split(n, 0.6, 0.2, 5)
}

#[test]
fn learns_the_planted_pattern_and_nothing_from_shuffled_labels() {
    let spec = synthetic(20_000, 16, 4, 4, 3, 1);
    let ds = WindowDataset::new(spec, Device::Cpu).unwrap();
    let (tr, va, te) = split(ds.len() as usize);
    let mut t = LstmTrainer::new(cfg(), dims(), Device::Cpu).unwrap();
    // Stop once the pattern is clearly learnt, to keep the suite fast.
    let hist = t.fit(&ds, &tr, &va, None, |s| s.best_mcc < 0.7).unwrap();
    let (_, best_mcc) = t.best().unwrap();
    let (_, test_conf) = t.evaluate(&ds, &te, None).unwrap();
    eprintln!("planted: {} epochs, best validation MCC {best_mcc:.3}, test MCC {:.3}", hist.len(), test_conf.mcc());
    assert!(best_mcc >= 0.5, "validation MCC {best_mcc}");
    assert!(test_conf.mcc() >= 0.5, "test MCC {} (restore_best failed?)", test_conf.mcc());

    // The same data with every label shuffled: nothing to learn, so the held-out MCC of the model
    // selected on validation must be near zero. A leak (labels reaching the inputs) would show here.
    let mut spec = synthetic(20_000, 16, 4, 4, 3, 1);
    let perm = Vec::<i64>::try_from(Tensor::randperm(spec.labels.len() as i64, (Kind::Int64, Device::Cpu))).unwrap();
    spec.labels = perm.iter().map(|&i| spec.labels[i as usize]).collect();
    let ds = WindowDataset::new(spec, Device::Cpu).unwrap();
    let mut t = LstmTrainer::new(LstmConfig { max_epochs: 8, ..cfg() }, dims(), Device::Cpu).unwrap();
    t.fit(&ds, &tr, &va, None, |_| true).unwrap();
    let (_, conf) = t.evaluate(&ds, &te, None).unwrap();
    eprintln!("shuffled: test MCC {:.4}", conf.mcc());
    assert!(conf.mcc().abs() < 0.05, "shuffled-label test MCC {}", conf.mcc());
}

#[test]
fn export_matches_tch_through_onnx_runtime() {
    let ds = WindowDataset::new(synthetic(2_000, 16, 4, 4, 3, 2), Device::Cpu).unwrap();
    let (tr, va, _) = split(ds.len() as usize);
    let mut t = LstmTrainer::new(LstmConfig { max_epochs: 2, ..cfg() }, dims(), Device::Cpu).unwrap();
    t.fit(&ds, &tr, &va, None, |_| true).unwrap();
    let bytes = t.net.export(&t.vs).unwrap().to_onnx(&[("kind", "lstm")]).unwrap();
    let rt = crate::runtime_libs::init_onnxruntime(None).unwrap();
    let mut s = ort::session::Session::builder(&rt.env).unwrap().commit_from_memory(&bytes).unwrap();
    let n = 300;
    let (xf, xs, xc) = (
        Tensor::randn([n, 16, 4], (Kind::Float, Device::Cpu)),
        Tensor::randn([n, 4, 4], (Kind::Float, Device::Cpu)),
        Tensor::randn([n, 3], (Kind::Float, Device::Cpu)),
    );
    let want = Vec::<f32>::try_from(tch::no_grad(|| t.net.probs(&xf, &xs, &xc)).reshape([-1])).unwrap();
    let arr = |x: &Tensor, shape: &[usize]| {
        ndarray::ArrayD::from_shape_vec(shape.to_vec(), Vec::<f32>::try_from(x.reshape([-1])).unwrap()).unwrap()
    };
    let (af, as_, ac) = (arr(&xf, &[300, 16, 4]), arr(&xs, &[300, 4, 4]), arr(&xc, &[300, 3]));
    let out = s
        .run(ort::inputs![
            "x_fast" => ort::value::TensorRef::from_array_view(af.view()).unwrap(),
            "x_slow" => ort::value::TensorRef::from_array_view(as_.view()).unwrap(),
            "x_context" => ort::value::TensorRef::from_array_view(ac.view()).unwrap(),
        ])
        .unwrap();
    let got = out["probs"].try_extract_array::<f32>().unwrap();
    let max_diff = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    assert!(max_diff <= 1e-5, "tch and ort differ by {max_diff}");
    let spread = want.chunks(3).map(|p| p[0]).fold((f32::MAX, f32::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    assert!(spread.1 - spread.0 > 0.01, "outputs barely vary: {spread:?}");
}

#[test]
fn checkpoints_resume_where_they_stopped() {
    let ds = WindowDataset::new(synthetic(2_000, 16, 4, 4, 3, 4), Device::Cpu).unwrap();
    let (tr, va, _) = split(ds.len() as usize);
    let dir = tempfile::tempdir().unwrap();
    let mut a =
        LstmTrainer::new(LstmConfig { max_epochs: 3, checkpoint_every: 1, ..cfg() }, dims(), Device::Cpu).unwrap();
    a.fit(&ds, &tr, &va, Some(dir.path()), |_| true).unwrap();
    for f in ["last.safetensors", "best.safetensors", "state.json"] {
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }
    let mut b =
        LstmTrainer::new(LstmConfig { max_epochs: 5, checkpoint_every: 1, ..cfg() }, dims(), Device::Cpu).unwrap();
    assert_eq!(b.optimizer_steps(), 0);
    b.resume(dir.path()).unwrap();
    assert_eq!(b.epoch, 3);
    // AdamW's state came back with the weights: one step per minibatch of the 3 epochs.
    let batches = tr.len().div_ceil(cfg().batch_size) as u64;
    assert_eq!(b.optimizer_steps(), 3 * batches);
    assert_eq!(b.best().map(|(e, _)| e), a.best().map(|(e, _)| e));
    let hist = b.fit(&ds, &tr, &va, Some(dir.path()), |_| true).unwrap();
    assert_eq!(hist.iter().map(|h| h.epoch).collect::<Vec<_>>(), vec![4, 5], "resumed at epoch 4");
    // A checkpoint of another shape is refused.
    let other = NetDims { context_dim: 5, ..dims() };
    let mut c = LstmTrainer::new(cfg(), other, Device::Cpu).unwrap();
    assert!(c.resume(dir.path()).is_err());
}

#[test]
fn early_stopping_respects_patience() {
    let ds = WindowDataset::new(synthetic(2_000, 16, 4, 4, 3, 5), Device::Cpu).unwrap();
    let (tr, va, _) = split(ds.len() as usize);
    // A learning rate this small cannot improve MCC for long: training must stop `patience` epochs
    // after the best one, well before max_epochs.
    let mut t = LstmTrainer::new(
        LstmConfig { learning_rate: 1e-7, patience: 3, max_epochs: 100, ..cfg() },
        dims(),
        Device::Cpu,
    )
    .unwrap();
    let hist = t.fit(&ds, &tr, &va, None, |_| true).unwrap();
    let best = t.best().unwrap().0;
    assert_eq!(hist.len(), best + 3, "stopped at {} with best {best}", hist.len());
}

/// On a GPU every read into host memory waits for the device: an epoch reads twice (the training loss,
/// then the validation loss with the confusion counts), however many batches it has. The counts read
/// back equal the confusion built on the host from `probs`.
#[test]
fn an_epoch_reads_from_the_device_twice_whatever_its_batch_count() {
    let spec = synthetic(2_000, 16, 4, 4, 3, 4);
    let labels = spec.labels.clone();
    let ds = WindowDataset::new(spec, Device::Cpu).unwrap();
    let (tr, va, _) = split(ds.len() as usize);
    let small = LstmConfig { batch_size: 64, max_epochs: 3, patience: 10, ..cfg() };
    let mut t = LstmTrainer::new(small, dims(), Device::Cpu).unwrap();
    let before = crate::ml::readback::reads();
    let hist = t.fit(&ds, &tr, &va, None, |_| true).unwrap();
    assert_eq!(hist.len(), 3);
    assert!(tr.len() / 64 > 10, "too few batches for the count to mean anything");
    assert_eq!(crate::ml::readback::reads() - before, 3 * 2);

    let (_, conf) = t.evaluate(&ds, &va, None).unwrap();
    let probs = t.probs(&ds, &va).unwrap();
    let mut want = vec![vec![0u64; 3]; 3];
    for (i, p) in va.iter().zip(&probs) {
        let pred = (0..3).max_by(|&a, &b| p[a].total_cmp(&p[b]).then(b.cmp(&a))).unwrap();
        want[labels[*i as usize] as usize][pred] += 1;
    }
    assert_eq!(conf.m, want);
    assert_eq!(conf.m.iter().flatten().sum::<u64>(), va.len() as u64);
}
