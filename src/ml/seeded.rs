//! Seeded initialisation on libtorch's one global generator. `seeded(seed, build)` holds a process-wide
//! lock while it seeds the generator and builds, so that models built at once on different threads (a
//! search's trials, tests) each get the weights their seed gives instead of draws interleaved with another's.

use std::sync::Mutex;

static LOCK: Mutex<()> = Mutex::new(());

/// Seeds libtorch's generator with `seed` and runs `build` before any other `seeded` call may draw.
pub(crate) fn seeded<T>(seed: u64, build: impl FnOnce() -> T) -> T {
    // A panic inside another build poisons nothing this one relies on: the generator is re-seeded here.
    let _guard = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    tch::manual_seed(seed as i64);
    build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    /// Eight threads drawing at once each get exactly what their seed gives alone.
    #[test]
    fn concurrent_seeded_draws_do_not_interleave() {
        let draw = || Vec::<f32>::try_from(Tensor::randn([256], (Kind::Float, Device::Cpu))).unwrap();
        let alone: Vec<Vec<f32>> = (0..8).map(|s| seeded(s, draw)).collect();
        let together: Vec<Vec<f32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8).map(|s| scope.spawn(move || seeded(s, draw))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(alone, together);
        assert_ne!(alone[0], alone[1]);
    }
}
