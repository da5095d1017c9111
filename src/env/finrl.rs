//! FinRL-compatible numerics for the execution rule, selected by `Accounting::FinrlNumpy`.
//!
//! FinRL 0.3.7's numpy `StockTradingEnv` keeps prices and holdings in float32 and cash in a Python float,
//! and NumPy 2's promotion rules then decide, expression by expression, whether cash is updated in float32
//! or float64 (a Python float is "weak" and takes the other operand's type; float32 with int64 gives
//! float64). The quantities bought depend on `floor(cash / price)`, so one rounding difference changes
//! the holdings for good. This module carries each scalar with its NumPy type ([`Np`]) and applies the same
//! rule as [`crate::exec`] — sells before buys, requested size at least `min_order`, sells capped at the
//! holding, buys capped at `floor(cash / price)` (fees not included), fees on both sides, everything sold
//! on turbulent days — with those types. Slippage, trailing stops and cooldown do not exist in FinRL and
//! are not applied here.

use crate::exec::{ExecParams, Position};

/// The NumPy type of a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// A Python float: takes the type of a NumPy operand.
    #[default]
    Weak,
    /// A NumPy float32.
    F32,
    /// A NumPy float64.
    F64,
    /// A NumPy int64.
    I64,
}

/// A scalar with its NumPy type; `v` holds the value exactly (an F32 value is a rounded f32).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Np {
    /// The value, exact in f64 (rounded to f32 first when `kind` is `F32`).
    pub v: f64,
    /// The NumPy type it has, which decides the type of what it is combined with.
    pub kind: Kind,
}

fn promote(a: Kind, b: Kind) -> Kind {
    match (a, b) {
        (Kind::Weak, Kind::Weak) => Kind::Weak,
        (Kind::Weak, Kind::I64) | (Kind::I64, Kind::Weak) => Kind::F64,
        (Kind::Weak, k) | (k, Kind::Weak) => k,
        (Kind::F32, Kind::F32) => Kind::F32,
        (Kind::I64, Kind::I64) => Kind::I64,
        _ => Kind::F64,
    }
}

impl Np {
    /// `v` taken as it is, with type `kind` (the caller rounds an F32 value).
    pub fn new(v: f64, kind: Kind) -> Self {
        Np { v, kind }
    }

    fn f32(v: f32) -> Self {
        Np { v: f64::from(v), kind: Kind::F32 }
    }

    fn op(self, rhs: Np, f64op: fn(f64, f64) -> f64, f32op: fn(f32, f32) -> f32) -> Np {
        let kind = promote(self.kind, rhs.kind);
        let v = if kind == Kind::F32 { f64::from(f32op(self.v as f32, rhs.v as f32)) } else { f64op(self.v, rhs.v) };
        Np { v, kind }
    }

    /// NumPy's `//` on floats (`npy_divmod`), in the promoted type.
    pub fn floor_div(self, rhs: Np) -> Np {
        self.op(rhs, floor_div_f64, floor_div_f32)
    }

    /// Python's `min(self, other)`: `other` only when strictly smaller.
    fn min(self, other: Np) -> Np {
        if other.v < self.v { other } else { self }
    }
}

impl std::ops::Add for Np {
    type Output = Np;
    fn add(self, rhs: Np) -> Np {
        self.op(rhs, |a, b| a + b, |a, b| a + b)
    }
}

impl std::ops::Sub for Np {
    type Output = Np;
    fn sub(self, rhs: Np) -> Np {
        self.op(rhs, |a, b| a - b, |a, b| a - b)
    }
}

impl std::ops::Mul for Np {
    type Output = Np;
    fn mul(self, rhs: Np) -> Np {
        self.op(rhs, |a, b| a * b, |a, b| a * b)
    }
}

/// `x.trunc()` for f32, bit for bit (signed zeros, NaN and infinities included), without the libm call that
/// `f32::trunc` is on baseline x86-64 (no SSE4.1): a quarter of FinRL's step went to `truncf` and `floor`.
/// Every f32 of magnitude 2^23 or more is an integer already.
#[inline]
fn trunc_f32(x: f32) -> f32 {
    if x.abs() < 8_388_608.0 { (x as i32 as f32).copysign(x) } else { x }
}

/// `x.floor()` for f32, bit for bit: the truncation, one lower where it rounded up (a negative fraction).
#[inline]
fn floor_f32(x: f32) -> f32 {
    let t = trunc_f32(x);
    if t > x { t - 1.0 } else { t }
}

/// `x.floor()` for f64, bit for bit, as [`floor_f32`] (every f64 of magnitude 2^52 or more is an integer).
#[inline]
fn floor_f64(x: f64) -> f64 {
    let t = if x.abs() < 4_503_599_627_370_496.0 { (x as i64 as f64).copysign(x) } else { x };
    if t > x { t - 1.0 } else { t }
}

macro_rules! npy_floor_div {
    ($name:ident, $t:ty, $floor:ident) => {
        /// `npy_divmod`'s quotient: the floor of the exact quotient a / b. When the rounded quotient is
        /// more than a few ulps from an integer, its floor is that floor already (the fmod path is slow).
        fn $name(a: $t, b: $t) -> $t {
            if b == 0.0 {
                return a / b;
            }
            let q = a / b;
            let f = $floor(q);
            let margin = q.abs() * (8.0 * <$t>::EPSILON) + <$t>::MIN_POSITIVE;
            if q.is_finite() && q - f > margin && (f + 1.0) - q > margin {
                return f;
            }
            let m = a % b;
            let mut div = (a - m) / b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                div -= 1.0;
            }
            if div == 0.0 {
                return (0.0 as $t).copysign(a / b);
            }
            let mut floor = div.floor();
            if div - floor > 0.5 {
                floor += 1.0;
            }
            floor
        }
    };
}
npy_floor_div!(floor_div_f32, f32, floor_f32);
npy_floor_div!(floor_div_f64, f64, floor_f64);

/// NumPy's float32 `sum` of a short contiguous array: pairwise with eight accumulators (n ≤ 128).
pub fn np_sum_f32(x: &[f32]) -> f32 {
    if x.len() > 128 {
        let half = x.len() / 2;
        let half = half - half % 8;
        return np_sum_f32(&x[..half]) + np_sum_f32(&x[half..]);
    }
    if x.len() < 8 {
        return x.iter().fold(-0.0f32, |s, v| s + v) + 0.0;
    }
    let mut r = [0f32; 8];
    r.copy_from_slice(&x[..8]);
    let full = x.len() - x.len() % 8;
    for chunk in x[8..full].chunks_exact(8) {
        for (acc, v) in r.iter_mut().zip(chunk) {
            *acc += v;
        }
    }
    let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for v in &x[full..] {
        s += v;
    }
    0.0 + s
}

/// `(stocks * price).sum()` in float32.
fn stock_value(pos: &[Position], prices: &[f32], scratch: &mut Vec<f32>) -> Np {
    scratch.clear();
    scratch.extend(pos.iter().zip(prices).map(|(p, px)| p.holding as f32 * px));
    Np::f32(np_sum_f32(scratch))
}

/// One FinRL step of one account at `prices`; returns the total asset (cash + holdings) afterwards.
pub fn step(
    p: &ExecParams,
    pos: &mut [Position],
    cash: &mut Np,
    prices: &[f32],
    actions: &[f32],
    turbulent: bool,
    scratch: &mut Vec<f32>,
) -> Np {
    let fee = p.fee_bps / 1e4;
    let (sell_keep, buy_pay) = (Np::new(1.0 - fee, Kind::Weak), Np::new(1.0 + fee, Kind::Weak));
    if turbulent {
        *cash = *cash + stock_value(pos, prices, scratch) * sell_keep;
        pos.iter_mut().for_each(|q| q.holding = 0.0);
    } else {
        let hmax = p.max_trade as f32;
        let unit = |k: usize| f64::from(trunc_f32(actions[k] * hmax));
        for k in 0..pos.len() {
            let u = unit(k);
            if -u >= p.min_order {
                let held = Np::f32(pos[k].holding as f32);
                let qty = held.min(Np::new(-u, Kind::I64));
                pos[k].holding = f64::from((pos[k].holding - qty.v) as f32);
                *cash = *cash + Np::f32(prices[k]) * qty * sell_keep;
            }
        }
        for k in 0..pos.len() {
            let u = unit(k);
            if u >= p.min_order {
                let price = Np::f32(prices[k]);
                let qty = cash.floor_div(price).min(Np::new(u, Kind::I64));
                pos[k].holding = f64::from((pos[k].holding + qty.v) as f32);
                *cash = *cash - price * qty * buy_pay;
            }
        }
    }
    *cash + stock_value(pos, prices, scratch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_follows_numpy_2() {
        let w = Np::new(1e6, Kind::Weak);
        assert_eq!((w + Np::f32(0.1)).kind, Kind::F32);
        assert_eq!((w + Np::f32(0.1)).v, f64::from(1e6f32 + 0.1f32));
        assert_eq!((Np::f32(2.5) * Np::new(3.0, Kind::I64)).kind, Kind::F64);
        assert_eq!((Np::f32(2.5) + Np::new(1.0, Kind::F64)).kind, Kind::F64);
        assert_eq!((w * Np::new(3.0, Kind::Weak)).kind, Kind::Weak);
    }

    /// The fast path and the fmod path agree, near integers and away from them, for both signs.
    #[test]
    fn floor_division_fast_path_agrees_with_npy_divmod() {
        fn slow(a: f64, b: f64) -> f64 {
            let m = a % b;
            let mut div = (a - m) / b;
            if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
                div -= 1.0;
            }
            if div == 0.0 {
                return 0.0f64.copysign(a / b);
            }
            let mut floor = div.floor();
            if div - floor > 0.5 {
                floor += 1.0;
            }
            floor
        }
        let mut rng = super::super::rng::SplitMix64::new(3);
        for _ in 0..200_000 {
            let b = 0.01 + (rng.next_u64() % 40_000) as f64 / 100.0;
            let n = (rng.next_u64() % 100_000) as f64 - 50_000.0;
            let jitter = [0.0, 1e-12, -1e-12, 0.37, f64::EPSILON * n.abs()][rng.below(5)];
            let a = n * b + jitter * b;
            assert_eq!(floor_div_f64(a, b).to_bits(), slow(a, b).to_bits(), "{a} // {b}");
        }
    }

    /// The libm-free floor and trunc equal the standard library's bit for bit: signed zeros, halves,
    /// values next to integers and to 2^23 / 2^52, huge ones, infinities and NaN, and a seeded sweep.
    #[test]
    fn floor_and_trunc_without_libm_equal_the_standard_ones_bit_for_bit() {
        let mut f64s = vec![0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 2.0 - 1e-15, -(2.0 - 1e-15), 1e300, -1e300];
        f64s.extend([f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MIN_POSITIVE, -f64::MIN_POSITIVE, 4.5e15]);
        for p in [2f64.powi(52), 2f64.powi(63)] {
            f64s.extend([p, -p, p - 0.5, -(p - 0.5), p + 2.0, -(p + 2.0)]);
        }
        let mut rng = crate::env::rng::SplitMix64::new(7);
        for _ in 0..20_000 {
            let scale = 10f64.powi((rng.next_f64() * 40.0) as i32 - 20);
            f64s.push((rng.next_f64() * 2.0 - 1.0) * scale);
        }
        let same64 = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let same32 = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for &x in &f64s {
            assert!(same64(floor_f64(x), x.floor()), "floor({x:e}): {} vs {}", floor_f64(x), x.floor());
            let y = x as f32;
            assert!(same32(floor_f32(y), y.floor()), "floor({y:e}f32): {} vs {}", floor_f32(y), y.floor());
            assert!(same32(trunc_f32(y), y.trunc()), "trunc({y:e}f32): {} vs {}", trunc_f32(y), y.trunc());
        }
        for p in [2f32.powi(23), 2f32.powi(31)] {
            for y in [p, -p, p - 0.5, -(p - 0.5), p + 2.0, -(p + 2.0)] {
                assert!(same32(floor_f32(y), y.floor()) && same32(trunc_f32(y), y.trunc()), "{y:e}");
            }
        }
    }

    #[test]
    fn floor_division_matches_python() {
        assert_eq!(floor_div_f64(7.0, 2.0), 3.0);
        assert_eq!(floor_div_f64(-7.0, 2.0), -4.0);
        assert_eq!(floor_div_f64(-1.0, 10.0), -1.0);
        assert_eq!(floor_div_f64(1.0, 0.1), 9.0); // Python: 1.0 // 0.1 == 9.0, not floor(1.0 / 0.1) == 10.
        // float32(0.1) is slightly above 0.1: NumPy gives 9.0 for np.float32(1) // np.float32(0.1).
        assert_eq!(floor_div_f32(1.0, 0.1), 9.0);
        assert_eq!(floor_div_f32(3.0, 1.5), 2.0);
    }

    #[test]
    fn pairwise_sum_adds_in_numpys_order() {
        let x: Vec<f32> = (0..30).map(|i| 1.0e7 + i as f32 * 0.37).collect();
        let mut r = [0f32; 8];
        r.copy_from_slice(&x[..8]);
        for c in x[8..24].chunks(8) {
            for j in 0..8 {
                r[j] += c[j];
            }
        }
        let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for v in &x[24..] {
            s += v;
        }
        assert_eq!(np_sum_f32(&x), s);
        // What NumPy 2.4 prints for np.sum of this float32 array.
        assert_eq!(np_sum_f32(&x), 3.0000016e8);
        let naive = x.iter().fold(0f32, |a, b| a + b);
        assert_ne!(naive, s, "the test data must tell the two orders apart");
    }
}
