use super::Parts;
use crate::lstm::dataset::{WindowDataset, synthetic};
use crate::lstm::tests::{cfg, dims};
use crate::lstm::train::LstmTrainer;
use tch::{Device, Kind, Tensor};

fn trainer_and_data() -> (LstmTrainer, WindowDataset) {
    let ds = WindowDataset::new(synthetic(2_000, 16, 4, 4, 3, 5), Device::Cpu).unwrap();
    (LstmTrainer::new(cfg(), dims(), Device::Cpu).unwrap(), ds)
}

/// The loss and gradients of one pass over the batch `idx`, as the trainer takes them without parts.
fn one_pass(t: &LstmTrainer, ds: &WindowDataset, idx: &Tensor, weights: Option<&Tensor>) -> (f64, Vec<Tensor>) {
    let params = t.vs.trainable_variables();
    for p in &params {
        let mut p = p.shallow_clone();
        p.zero_grad();
    }
    let b = ds.batch(idx);
    let logits = t.net.forward(&b.fast, &b.slow, &b.context);
    let loss = logits.cross_entropy_loss(&b.labels, weights, tch::Reduction::Mean, -100, 0.0);
    loss.backward();
    (loss.double_value(&[]), params.iter().map(|p| p.grad().copy()).collect())
}

fn max_abs(t: &Tensor) -> f64 {
    t.abs().max().double_value(&[])
}

/// Three parts of a batch of 301 (101, 100, 100 samples), with and without class weights: the loss and
/// every gradient are one pass's, to float rounding.
#[test]
fn a_batch_in_parts_has_the_loss_and_gradient_of_one_pass() {
    let (t, ds) = trainer_and_data();
    let idx = Tensor::arange_start(150, 451, (Kind::Int64, Device::Cpu));
    let class_weights = Tensor::from_slice(&[0.5f32, 2.0, 1.25]);
    for weights in [None, Some(&class_weights)] {
        let (want_loss, want) = one_pass(&t, &ds, &idx, weights);
        let parts = Parts::new(3, &t.net, &ds, weights, &t.vs.trainable_variables()).unwrap();
        assert_eq!(parts.count(), 3, "the caller's part and two workers'");
        assert!(parts.first.native.is_some(), "the parts run the LSTM layers natively");
        let (loss, grads) = parts.step(&idx).unwrap();
        let loss = loss.double_value(&[]);
        assert!((loss - want_loss).abs() <= 1e-6 * want_loss.abs(), "loss {loss} against one pass's {want_loss}");
        assert_eq!(grads.len(), want.len());
        for (g, w) in grads.iter().zip(&want) {
            let scale = max_abs(w).max(1e-6);
            let diff = max_abs(&(g - w));
            assert!(diff <= 1e-5 * scale, "a gradient differs by {diff} (largest entry {scale})");
        }
    }
}

/// Each part's thread runs libtorch on one thread of its own, whatever the caller's count; the caller's
/// count is its own again once the parts are made.
#[test]
fn the_same_batch_in_parts_gives_the_same_bits_every_time_each_part_on_one_thread() {
    let (t, ds) = trainer_and_data();
    let idx = Tensor::randperm(1_000, (Kind::Int64, Device::Cpu)).narrow(0, 0, 256);
    tch::set_num_threads(2);
    let parts = Parts::new(3, &t.net, &ds, None, &t.vs.trainable_variables()).unwrap();
    assert_eq!(parts.worker_threads(), 1);
    assert_eq!(tch::get_num_threads(), 2);
    let (l1, g1) = parts.step(&idx).unwrap();
    let (l2, g2) = parts.step(&idx).unwrap();
    assert!(l1.equal(&l2));
    assert!(g1.iter().zip(&g2).all(|(a, b)| a.equal(b)), "the gradients of the same batch differ");
    assert_eq!(parts.worker_threads(), 1, "a part's thread ran libtorch on more than one thread");
}

/// A part that fails (a sample index past the data, in the worker's part and then in the caller's) is an
/// error naming libtorch's reason, not a panic of the trainer; the threads go on with the next batch.
#[test]
fn a_part_that_fails_is_an_error_and_the_next_batch_still_runs() {
    let (t, ds) = trainer_and_data();
    let parts = Parts::new(2, &t.net, &ds, None, &t.vs.trainable_variables()).unwrap();
    let past_the_end = ds.len() + 10;
    for bad in [Tensor::from_slice(&[0i64, 1, 2, past_the_end]), Tensor::from_slice(&[past_the_end, 0, 1, 2])] {
        let err = parts.step(&bad).unwrap_err();
        assert!(err.contains("out of range") || err.contains("index"), "{err}");
    }
    let (loss, grads) = parts.step(&Tensor::arange(64, (Kind::Int64, Device::Cpu))).unwrap();
    assert!(loss.double_value(&[]).is_finite());
    assert!(grads.iter().all(|g| g.defined()));
}

/// A part whose thread is gone fails its batch with that reason, without waiting on it, and the caller's
/// part of the next batch does not meet a result left over from this one.
#[test]
fn a_part_whose_thread_is_gone_fails_its_batch_with_the_reason() {
    let (t, ds) = trainer_and_data();
    let mut parts = Parts::new(3, &t.net, &ds, None, &t.vs.trainable_variables()).unwrap();
    parts.workers[1].jobs = None;
    if let Some(thread) = parts.workers[1].thread.take() {
        thread.join().unwrap();
    }
    let idx = Tensor::arange(90, (Kind::Int64, Device::Cpu));
    for _ in 0..2 {
        assert_eq!(parts.step(&idx).unwrap_err(), "a training thread has stopped");
    }
    parts.workers.truncate(1);
    let (want, _) = Parts::new(2, &t.net, &ds, None, &t.vs.trainable_variables()).unwrap().step(&idx).unwrap();
    let (got, _) = parts.step(&idx).unwrap();
    assert!(got.equal(&want), "a result left over from a failed batch was taken for this one");
}
