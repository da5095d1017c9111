//! Reads of tensor values into host memory on the training paths. On a GPU each one waits for every
//! queued kernel (a device-to-host synchronisation), so the trainers read through here and tests count
//! the calls: a rollout step must make none, an update a fixed few (`rl::ppo` tests).

use std::cell::Cell;
use tch::{Device, Kind, Tensor};

thread_local! {
    static READS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    READS.with(|r| r.set(r.get() + 1));
}

/// Reads made on this thread so far.
pub fn reads() -> u64 {
    READS.with(Cell::get)
}

/// The value of a one-element tensor, as f64.
pub fn scalar(t: &Tensor) -> f64 {
    count();
    t.double_value(&[])
}

/// A tensor's values as host f64s, flattened (one read however many values).
pub fn f64s(t: &Tensor) -> Result<Vec<f64>, tch::TchError> {
    count();
    Vec::<f64>::try_from(t.to_device(Device::Cpu).to_kind(Kind::Double).reshape([-1]))
}

/// A tensor's values as host f32s, flattened (one read however many values).
pub fn f32s(t: &Tensor) -> Result<Vec<f32>, tch::TchError> {
    count();
    Vec::<f32>::try_from(t.to_device(Device::Cpu).to_kind(Kind::Float).reshape([-1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_is_counted_once() {
        let before = reads();
        let t = Tensor::from_slice(&[1.5f32, 2.5]);
        assert_eq!(scalar(&t.sum(Kind::Float)), 4.0);
        assert_eq!(f64s(&t).unwrap(), vec![1.5, 2.5]);
        assert_eq!(f32s(&t).unwrap(), vec![1.5, 2.5]);
        assert_eq!(reads() - before, 3);
    }
}
