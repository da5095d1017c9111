//! The steady part of a measurement on a GPU: from the end of its first unit of work (an update, a round,
//! an epoch, a batch of env steps) to its end, with NVML sampling the GPU over just that part. The first
//! unit pays for what a run does once (cuBLAS's and cuDNN's handles, the caching allocator's first blocks,
//! the first launch of each kernel), and a whole process's GPU-busy figure also counts its start (loading
//! libtorch, building the data, compiling the env kernel): neither says how busy the work keeps the GPU.
//! On the CPU there is no window: the figures stay the whole run's, as they always were.

use crate::ml::gpu::{GpuSampler, GpuStats};
use std::time::{Duration, Instant};

/// How often NVML is read during the window.
const EVERY: Duration = Duration::from_millis(100);

/// A window opened at the end of a run's first unit of work (on CUDA only).
pub(crate) struct Steady {
    cuda: bool,
    from: Option<(Instant, u64)>,
    sampler: Option<GpuSampler>,
}

/// What the window saw: its seconds and units of work (env steps, samples), and the GPU over it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    pub seconds: f64,
    pub work: u64,
    pub gpu: Option<GpuStats>,
}

impl Steady {
    /// A window for a run on `device`: it opens only on CUDA.
    pub(crate) fn new(device: tch::Device) -> Steady {
        Steady { cuda: device.is_cuda(), from: None, sampler: None }
    }

    /// At the end of a unit of work, `done` the work so far: the first call on CUDA waits for the device
    /// and opens the window.
    pub(crate) fn mark(&mut self, done: u64) {
        if !self.cuda || self.from.is_some() {
            return;
        }
        tch::Cuda::synchronize(0);
        self.sampler = GpuSampler::start(0, EVERY)
            .map_err(|e| log::warn!("bench: the GPU's busy % over the steady part is not sampled: {e}"))
            .ok();
        self.from = Some((Instant::now(), done));
    }

    /// At the run's end, `done` the work in all: the window (`None` on the CPU, or when the run ended
    /// with its first unit of work, leaving nothing after it).
    pub(crate) fn close(self, done: u64) -> Option<Window> {
        let (at, before) = self.from?;
        tch::Cuda::synchronize(0);
        let seconds = at.elapsed().as_secs_f64();
        let gpu = self.sampler.map(GpuSampler::stop).filter(|g| g.samples > 0);
        (done > before).then_some(Window { seconds, work: done - before, gpu })
    }
}

/// Joins the windows of repeated runs: their seconds and work added, their GPU samples weighted by count.
pub(crate) fn join(a: Option<Window>, b: Option<Window>) -> Option<Window> {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (a, b) => return a.or(b),
    };
    let gpu = match (a.gpu, b.gpu) {
        (Some(x), Some(y)) => Some(GpuStats::merge(&x, &y)),
        (x, y) => x.or(y),
    };
    Some(Window { seconds: a.seconds + b.seconds, work: a.work + b.work, gpu })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the CPU no window opens: the figures stay the whole run's.
    #[test]
    fn on_the_cpu_there_is_no_window() {
        let mut s = Steady::new(tch::Device::Cpu);
        s.mark(10);
        assert_eq!(s.close(100), None);
    }

    /// Repeated runs' windows add their seconds and work, and weigh each GPU figure by its samples.
    #[test]
    fn windows_join_by_adding_their_time_and_weighing_their_samples() {
        let g = |n: usize, busy: f64, mem: f64| GpuStats {
            samples: n,
            busy_mean_pct: busy,
            busy_min_pct: busy,
            memory_max_mb: mem,
            power_mean_w: 100.0,
        };
        let a = Window { seconds: 1.0, work: 10, gpu: Some(g(3, 90.0, 500.0)) };
        let b = Window { seconds: 3.0, work: 30, gpu: Some(g(1, 50.0, 700.0)) };
        let j = join(Some(a), Some(b)).unwrap();
        assert_eq!((j.seconds, j.work), (4.0, 40));
        let gpu = j.gpu.unwrap();
        assert_eq!((gpu.samples, gpu.busy_mean_pct, gpu.busy_min_pct, gpu.memory_max_mb), (4, 80.0, 50.0, 700.0));
        assert_eq!(join(None, Some(b)), Some(b));
    }
}
