//! A population's random draws as counter-based streams on the device: each trial's action noise and
//! minibatch order are a hash (SplitMix64's finaliser) of its own seed and a counter, computed with
//! integer tensor ops. libtorch's one global generator would hand a trial different draws depending on
//! how many trials drew before it; these streams give a trial the same draws alone or among any others.

use tch::{Device, Kind, Tensor};

const GOLDEN: i64 = 0x9E37_79B9_7F4A_7C15_u64 as i64;
const MIX1: i64 = 0xBF58_476D_1CE4_E5B9_u64 as i64;
const MIX2: i64 = 0x94D0_49BB_1331_11EB_u64 as i64;
/// Salts that keep a trial's noise stream and its minibatch stream apart.
pub(super) const NOISE: i64 = 0x6A09_E667_F3BC_C908_u64 as i64;
pub(super) const ORDER: i64 = 0x3C6E_F372_FE94_F82B_u64 as i64;

/// `x >> s` as an unsigned 64-bit shift, on i64 tensors (whose `>>` keeps the sign).
fn shr(x: &Tensor, s: i64) -> Tensor {
    x.bitwise_right_shift_tensor_scalar(s).bitwise_and((1i64 << (64 - s)) - 1)
}

/// SplitMix64's output for state `z` (wrapping i64 arithmetic: the bits of the u64 formula).
fn mix(z: Tensor) -> Tensor {
    let z = z.bitwise_xor_tensor(&shr(&z, 30)) * MIX1;
    let z = z.bitwise_xor_tensor(&shr(&z, 27)) * MIX2;
    z.bitwise_xor_tensor(&shr(&z, 31))
}

/// `[P, n]` hashed words: trial p's draws `counter[p] * n + 0..n` of the stream `seed[p] ^ salt`.
/// `seeds` and `counters` are `[P]` i64 tensors on the device.
pub(super) fn words(seeds: &Tensor, counters: &Tensor, n: i64, salt: i64) -> Tensor {
    let device = seeds.device();
    let base = (seeds.bitwise_xor(salt)).unsqueeze(1);
    let index = counters.unsqueeze(1) * n + Tensor::arange(n, (Kind::Int64, device)).unsqueeze(0);
    mix(base + (index + 1) * GOLDEN)
}

/// `[P, n]` standard normals (Box-Muller on the two 32-bit halves of each word), f32.
pub(super) fn normals(seeds: &Tensor, counters: &Tensor, n: i64) -> Tensor {
    let w = words(seeds, counters, n, NOISE);
    let scale = 1.0 / 4_294_967_296.0;
    let hi = (shr(&w, 32).to_kind(Kind::Double) + 0.5) * scale;
    let lo = (w.bitwise_and(0xFFFF_FFFF).to_kind(Kind::Double) + 0.5) * scale;
    ((hi.log() * -2.0).sqrt() * (lo * (2.0 * std::f64::consts::PI)).cos()).to_kind(Kind::Float)
}

/// `[P, n]` permutations of `0..n`, trial p's being draw `counters[p]` of its minibatch stream.
pub(super) fn permutations(seeds: &Tensor, counters: &Tensor, n: i64) -> Tensor {
    words(seeds, counters, n, ORDER).argsort_stable(true, 1, false)
}

/// Per-trial values as a `[P]` tensor on `device`.
pub(super) fn column(values: &[i64], device: Device) -> Tensor {
    Tensor::from_slice(values).to_device(device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::rng::SplitMix64;

    /// The tensor hash is SplitMix64's, so the streams are the ones the host generator makes.
    #[test]
    fn words_are_splitmix64s_outputs_and_each_trial_draws_alone() {
        let seeds = column(&[5, 77, -3], Device::Cpu);
        let counters = column(&[0, 2, 1], Device::Cpu);
        let w = Vec::<i64>::try_from(words(&seeds, &counters, 4, 0).reshape([-1])).unwrap();
        for (p, (&seed, &counter)) in [5i64, 77, -3].iter().zip(&[0u64, 2, 1]).enumerate() {
            for i in 0..4u64 {
                let want = SplitMix64::nth(seed as u64, counter * 4 + i);
                assert_eq!(w[p * 4 + i as usize] as u64, want, "trial {p}, draw {i}");
            }
        }
        let alone =
            Vec::<i64>::try_from(words(&column(&[77], Device::Cpu), &column(&[2], Device::Cpu), 4, 0).reshape([-1]))
                .unwrap();
        assert_eq!(alone, w[4..8]);
    }

    #[test]
    fn normals_look_standard_and_permutations_are_permutations() {
        let seeds = column(&[1, 2], Device::Cpu);
        let z = normals(&seeds, &column(&[0, 0], Device::Cpu), 20_000);
        let (mean, std) = (z.mean(Kind::Double).double_value(&[]), z.std(true).double_value(&[]));
        assert!(mean.abs() < 0.03 && (std - 1.0).abs() < 0.03, "mean {mean}, std {std}");
        assert!(z.isfinite().all().int64_value(&[]) == 1);
        let perm = permutations(&seeds, &column(&[3, 3], Device::Cpu), 100);
        let sorted = perm.sort(1, false).0;
        let want = Tensor::arange(100, (Kind::Int64, Device::Cpu)).unsqueeze(0).expand([2, 100], false);
        assert!(sorted.equal(&want));
        assert!(!perm.get(0).equal(&perm.get(1)), "two seeds gave one order");
    }
}
