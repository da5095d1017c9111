//! A small seeded generator (SplitMix64) for episode starts and test actions: the same seed gives the same
//! stream on every platform and every version, with no dependency to pin.

/// SplitMix64: a seeded 64-bit generator whose state is a counter, so its `n`-th output can be computed directly
/// (`nth`).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// The stream seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next output of the stream.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }

    /// The `n`-th output (0-based) of the stream seeded with `seed`, without the ones before it: the
    /// state is a counter. The environment kernel computes the same draw (`tb_splitmix`).
    pub fn nth(seed: u64, n: u64) -> u64 {
        mix(seed.wrapping_add(n.wrapping_add(1).wrapping_mul(GAMMA)))
    }

    /// Uniform in [0, n) (n > 0); the modulo bias is below 2^-40 for the sizes used here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }

    /// Uniform in [-1, 1).
    pub fn action(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproducible_and_roughly_uniform() {
        let (mut a, mut b) = (SplitMix64::new(3), SplitMix64::new(3));
        let xs: Vec<f64> = (0..10_000).map(|_| a.next_f64()).collect();
        assert!(xs.iter().zip((0..10_000).map(|_| b.next_f64())).all(|(x, y)| *x == y));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
    }

    #[test]
    fn nth_is_the_streams_nth_draw() {
        for seed in [0, 7, u64::MAX - 3] {
            let mut s = SplitMix64::new(seed);
            for n in 0..1000 {
                assert_eq!(s.next_u64(), SplitMix64::nth(seed, n), "seed {seed}, draw {n}");
            }
        }
    }
}
