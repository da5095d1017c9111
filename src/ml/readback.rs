//! Reads of tensor values into host memory on the training paths. On a GPU each one waits for every
//! queued kernel (a device-to-host synchronisation), so the trainers read through here and tests count
//! the calls: a rollout step must make none, an update a fixed few (`rl::ppo` tests).
//!
//! Every read returns a `Result`: a read is where an asynchronous device fault (an illegal address in a
//! kernel, a lost device) surfaces, and tch's plain accessors (`double_value`, `to_device`, ...) panic on
//! it. Here it comes back as libtorch's error, message and all, for the trainer to end the run with.

use std::cell::Cell;
use tch::{Device, Kind, TchError, Tensor};

thread_local! {
    static READS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    READS.with(|r| r.set(r.get() + 1));
}

/// Reads made on this thread so far.
#[cfg(test)]
pub(crate) fn reads() -> u64 {
    READS.with(Cell::get)
}

/// The value of a one-element tensor, as f64.
pub(crate) fn scalar(t: &Tensor) -> Result<f64, TchError> {
    count();
    defined(t)?;
    match t.numel() {
        1 => t.f_reshape([-1])?.f_to_device(Device::Cpu)?.f_double_value(&[0]),
        n => Err(TchError::Shape(format!("a scalar read of a tensor of {n} values (shape {:?})", t.size()))),
    }
}

/// A tensor's values as host f64s, flattened (one read however many values).
pub(crate) fn f64s(t: &Tensor) -> Result<Vec<f64>, TchError> {
    count();
    defined(t)?;
    Vec::<f64>::try_from(t.f_to_device(Device::Cpu)?.f_to_kind(Kind::Double)?.f_reshape([-1])?)
}

/// A tensor's values as host f32s, flattened (one read however many values).
pub(crate) fn f32s(t: &Tensor) -> Result<Vec<f32>, TchError> {
    count();
    defined(t)?;
    Vec::<f32>::try_from(t.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_reshape([-1])?)
}

/// tch's shape accessors panic on an undefined tensor (what a failed op can leave behind).
fn defined(t: &Tensor) -> Result<(), TchError> {
    if t.defined() { Ok(()) } else { Err(TchError::Torch("a read-back of an undefined tensor".into())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_is_counted_once() {
        let before = reads();
        let t = Tensor::from_slice(&[1.5f32, 2.5]);
        assert_eq!(scalar(&t.sum(Kind::Float)).unwrap(), 4.0);
        assert_eq!(f64s(&t).unwrap(), vec![1.5, 2.5]);
        assert_eq!(f32s(&t).unwrap(), vec![1.5, 2.5]);
        assert_eq!(reads() - before, 3);
    }

    /// What tch's accessors panic on comes back as an error naming it, and is still counted as a read.
    #[test]
    fn a_read_of_a_bad_tensor_is_an_error_not_a_panic() {
        let before = reads();
        let two = Tensor::from_slice(&[1.0f64, 2.0]);
        let e = scalar(&two).unwrap_err().to_string();
        assert!(e.contains("2 values"), "{e}");
        let undefined = Tensor::new();
        for e in [scalar(&undefined).err(), f64s(&undefined).err(), f32s(&undefined).err()] {
            let e = e.map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("undefined"), "{e}");
        }
        assert_eq!(scalar(&Tensor::from_slice(&[2.5f32])).unwrap(), 2.5);
        assert_eq!(reads() - before, 5);
    }
}
