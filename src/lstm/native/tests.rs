use super::Tape;
use crate::onnx::lstm::LstmLayer;
use tch::{Device, Kind, Tensor};

/// Deterministic values in about [-scale, scale].
fn wave(n: usize, k: f32, scale: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 + 1.0) * k).sin() * scale).collect()
}

fn weights(input: usize, hidden: usize) -> LstmLayer {
    LstmLayer {
        input_size: input,
        hidden,
        w_ih: wave(4 * hidden * input, 0.71, 0.4),
        w_hh: wave(4 * hidden * hidden, 0.53, 0.4),
        b_ih: wave(4 * hidden, 0.29, 0.3),
        b_hh: wave(4 * hidden, 0.17, 0.3),
    }
}

fn tensor(v: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(v).view(shape).set_requires_grad(true)
}

fn max_diff(a: &[f32], b: &Tensor) -> (f64, f64) {
    let b = Vec::<f32>::try_from(b.to_kind(Kind::Float).reshape([-1])).unwrap();
    assert_eq!(a.len(), b.len());
    let diff = a.iter().zip(&b).map(|(x, y)| f64::from((x - y).abs())).fold(0.0, f64::max);
    (diff, b.iter().map(|y| f64::from(y.abs())).fold(0.0, f64::max))
}

/// The last hidden state and every weight's gradient are libtorch's `lstm`'s (one layer, zero state,
/// batch first), to float rounding, at several shapes (a hidden size under, at and over eight lanes).
#[test]
fn the_last_state_and_the_weight_gradients_are_libtorchs() {
    for (batch, len, input, hidden) in [(7, 5, 3, 6), (33, 12, 17, 8), (64, 30, 5, 21), (1, 1, 1, 1)] {
        let w = weights(input, hidden);
        let x = wave(batch * len * input, 0.37, 1.5);
        let dh = wave(batch * hidden, 0.91, 1.0);
        let mut tape = Tape::default();
        let h = tape.forward(&w, &x, batch, len).unwrap().to_vec();
        let grads = tape.backward(&w, &dh).unwrap();

        let (i, h4) = (input as i64, 4 * hidden as i64);
        let params =
            [tensor(&w.w_ih, &[h4, i]), tensor(&w.w_hh, &[h4, h4 / 4]), tensor(&w.b_ih, &[h4]), tensor(&w.b_hh, &[h4])];
        let xt = Tensor::from_slice(&x).view([batch as i64, len as i64, i]);
        let zeros = Tensor::zeros([1, batch as i64, h4 / 4], (Kind::Float, Device::Cpu));
        let (_, want_h, _) = xt.lstm(&[&zeros, &zeros], &params.each_ref(), true, 1, 0.0, true, false, true);
        let want_h = want_h.squeeze_dim(0);
        let (diff, scale) = max_diff(&h, &want_h);
        assert!(diff <= 1e-6 * scale.max(1.0), "{batch}x{len}x{input}, hidden {hidden}: h differs by {diff}");
        let loss = (&want_h * Tensor::from_slice(&dh).view([batch as i64, h4 / 4])).sum(Kind::Float);
        let want = Tensor::run_backward(&[&loss], &params, false, false);
        for (got, want) in [&grads.w_ih, &grads.w_hh, &grads.bias, &grads.bias].into_iter().zip(&want) {
            let (diff, scale) = max_diff(got, want);
            assert!(
                diff <= 1e-5 * scale.max(1e-3),
                "{batch}x{len}x{input}, hidden {hidden}: a gradient differs by {diff} (largest {scale})"
            );
        }
    }
}

/// A NaN in one sequence's input makes that sequence's state NaN and leaves the others' as they are.
#[test]
fn a_nan_input_gives_its_sequence_a_nan_state_and_no_other() {
    let (batch, len, input, hidden) = (3, 4, 2, 9);
    let w = weights(input, hidden);
    let mut x = wave(batch * len * input, 0.37, 1.5);
    let mut tape = Tape::default();
    let clean = tape.forward(&w, &x, batch, len).unwrap().to_vec();
    x[len * input + 3] = f32::NAN; // sequence 1, step 1
    let h = tape.forward(&w, &x, batch, len).unwrap();
    assert!(h[hidden..2 * hidden].iter().all(|v| v.is_nan()), "sequence 1's state: {:?}", &h[hidden..2 * hidden]);
    assert_eq!(&h[..hidden], &clean[..hidden]);
    assert_eq!(&h[2 * hidden..], &clean[2 * hidden..]);
}

/// Inputs or a gradient of the wrong size are an error that names the sizes, not a panic.
#[test]
fn sizes_that_do_not_agree_are_an_error() {
    let w = weights(3, 4);
    let mut tape = Tape::default();
    let err = tape.forward(&w, &[0.0; 10], 2, 2).unwrap_err();
    assert!(err.contains("10 inputs for 2 sequences of 2 steps of 3"), "{err}");
    tape.forward(&w, &[0.5; 12], 2, 2).unwrap();
    let err = tape.backward(&w, &[1.0; 5]).err().unwrap();
    assert!(err.contains("a gradient of 5 for 2 states of 4"), "{err}");
    let err = tape.forward(&weights(0, 4), &[], 2, 2).unwrap_err();
    assert!(err.contains("steps of 0"), "a layer without inputs: {err}");
}
