//! The native trainer's GEMMs on a CPU with AVX2 and FMA, without packing: `c = a·b` or `c += a·b`, each
//! element of `c` the same chain of fused multiply-adds that `matrixmultiply`'s FMA kernels compute (`k` in
//! order from zero, in blocks of [`KC`] each added to `c`), so the same bits as `ndarray`'s
//! `general_mat_mul` on the same CPU (tested against it), where that GEMM copies both operands into panels
//! and runs its edge tiles through a buffer at every call: most of its time at SB3's 64-row minibatches.
//!
//! `b`'s rows must be contiguous; `a` may have any strides (each of its elements is broadcast). A CPU
//! without FMA keeps `general_mat_mul` (whose kernel then rounds the products apart). One difference is
//! left, in the sign of a zero: where every product of an element's chain underflows to -0 and is added to
//! a `c` of -0, `matrixmultiply` writes +0 in its edge tiles and -0 elsewhere; this kernel writes -0.

/// `matrixmultiply`'s `k` block for f32 (`S_KC`): each block's chain starts from zero and is added to `c`.
const KC: usize = 256;

/// A matrix over a slice: element `(i, j)` at `data[i * rs + j * cs]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mat<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub rs: usize,
    pub cs: usize,
}

impl<'a> Mat<'a> {
    /// `rows × cols` row-major at the start of `data`.
    pub(super) fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Mat<'a> {
        Mat { data, rows, cols, rs: cols, cs: 1 }
    }

    pub(super) fn t(self) -> Mat<'a> {
        Mat { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }

    /// Rows `from..from + rows`.
    pub(super) fn rows(self, from: usize, rows: usize) -> Mat<'a> {
        Mat { data: &self.data[from * self.rs..], rows, ..self }
    }

    /// Whether every element's index lies inside `data`.
    fn fits(&self) -> bool {
        self.rows == 0 || self.cols == 0 || (self.rows - 1) * self.rs + (self.cols - 1) * self.cs < self.data.len()
    }

    /// The same matrix stored row-major (a copy). A transposed row-major matrix (`rs == 1`, the forward
    /// pass's weights) is read row by row of its source and written eight of its rows at a time.
    pub(super) fn to_row_major(self) -> Vec<f32> {
        let (rows, cols) = (self.rows, self.cols);
        if self.rs != 1 || rows == 0 || cols == 0 {
            let mut out = Vec::with_capacity(rows * cols);
            for i in 0..rows {
                out.extend((0..cols).map(|j| self.data[i * self.rs + j * self.cs]));
            }
            return out;
        }
        let mut out = vec![0f32; rows * cols];
        for (i0, block) in out.chunks_mut(8 * cols).enumerate() {
            let height = block.len() / cols;
            for j in 0..cols {
                let src = &self.data[j * self.cs + 8 * i0..][..height];
                for (r, x) in src.iter().enumerate() {
                    block[r * cols + j] = *x;
                }
            }
        }
        out
    }
}

/// Whether [`gemm`] runs here for this call: the CPU has AVX2 and FMA (where `matrixmultiply` picks an FMA
/// kernel), `alpha` is 1, `beta` is 0 or 1 and `k` is not empty.
pub(super) fn usable(alpha: f32, beta: f32, k: usize) -> bool {
    alpha == 1.0 && (beta == 0.0 || beta == 1.0) && k > 0 && cpu_has_fma()
}

fn cpu_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `c = a·b` (`overwrite`) or `c += a·b`, `c` row-major `a.rows × b.cols`. Panics where the shapes do not
/// agree, `b`'s rows are not contiguous or the CPU lacks FMA (callers check [`usable`]).
pub(super) fn gemm(a: Mat<'_>, b: Mat<'_>, overwrite: bool, c: &mut [f32]) {
    assert!(a.cols == b.rows && b.cs == 1 && a.fits() && b.fits(), "fma_gemm: shapes");
    assert!(c.len() >= a.rows * b.cols, "fma_gemm: c holds {} of {}", c.len(), a.rows * b.cols);
    assert!(cpu_has_fma(), "fma_gemm: no AVX2 and FMA on this CPU");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has AVX2 and FMA (asserted just above); `kernel` needs nothing else.
    #[allow(unsafe_code)]
    unsafe {
        kernel(a, b, overwrite, c)
    }
}

/// Row tiles of four, then one at a time. The last columns (fewer than eight) come from a copy of `b`'s
/// padded with zeros to eight: their chains are the same, the padding's are computed and dropped.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn kernel(a: Mat<'_>, b: Mat<'_>, overwrite: bool, c: &mut [f32]) {
    let wide = b.cols / 8 * 8;
    let mut padded = Vec::new();
    if wide < b.cols {
        for k in 0..b.rows {
            let row = &b.data[k * b.rs..][..b.cols];
            padded.extend_from_slice(&row[wide..]);
            padded.resize((k + 1) * 8, 0.0);
        }
    }
    let tail = Mat::row_major(&padded, b.rows, 8);
    let mut i = 0;
    while i < a.rows {
        let take = if i + 4 <= a.rows { 4 } else { 1 };
        let mut j = 0;
        while j < b.cols {
            let (panel, bj, width) = if j + 16 <= wide {
                (b, j, 16)
            } else if j + 8 <= wide {
                (b, j, 8)
            } else {
                (tail, 0, b.cols - j)
            };
            let out = Out { i0: i, j0: j, width, ldc: b.cols, overwrite };
            match (take, width > 8) {
                (4, true) => tile::<4, 2>(a, panel, bj, out, c),
                (4, false) => tile::<4, 1>(a, panel, bj, out, c),
                (_, true) => tile::<1, 2>(a, panel, bj, out, c),
                (_, false) => tile::<1, 1>(a, panel, bj, out, c),
            }
            j += width;
        }
        i += take;
    }
}

/// Where a tile goes in `c`: rows from `i0`, `width` columns from `j0`, rows `ldc` apart.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Out {
    i0: usize,
    j0: usize,
    width: usize,
    ldc: usize,
    overwrite: bool,
}

/// An `R`-row tile of `V` vectors of eight columns: `a`'s rows from `out.i0` times `b`'s columns from `bj`,
/// per block of [`KC`] a fused multiply-add chain from zero over the block's `k` in order, then written
/// (the first block, overwriting) or added to `c`; `out.width` of its columns are kept.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn tile<const R: usize, const V: usize>(a: Mat<'_>, b: Mat<'_>, bj: usize, out: Out, c: &mut [f32]) {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps};
    // Every read below is inside the slices: the rows `i0..i0 + R` of `a` exist, `bj + 8 V <= b.cols`
    // (or `b` is the padded tail of eight columns), `b.cs == 1` and both passed `Mat::fits` (`gemm`).
    debug_assert!(out.i0 + R <= a.rows && bj + 8 * V <= b.cols && b.cs == 1 && a.fits() && b.fits());
    let mut k0 = 0;
    while k0 < a.cols {
        let k1 = (k0 + KC).min(a.cols);
        let mut lanes = [[0f32; 16]; R];
        // SAFETY: `kernel`'s callers checked AVX2 and FMA; the reads are in bounds (above) and each store
        // writes eight of a row of `lanes` at 0 or 8.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); V]; R];
            let (ap, bp) = (a.data.as_ptr(), b.data.as_ptr());
            for k in k0..k1 {
                let brow = bp.add(k * b.rs + bj);
                let mut bv = [_mm256_setzero_ps(); V];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = _mm256_loadu_ps(brow.add(8 * v));
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_ps(*ap.add((out.i0 + r) * a.rs + k * a.cs));
                    for (s, y) in acc.iter_mut().zip(&bv) {
                        *s = _mm256_fmadd_ps(x, *y, *s);
                    }
                }
            }
            for (l, acc) in lanes.iter_mut().zip(&acc) {
                for (v, x) in acc.iter().enumerate() {
                    _mm256_storeu_ps(l.as_mut_ptr().add(8 * v), *x);
                }
            }
        }
        for (r, lanes) in lanes.iter().enumerate() {
            let row = &mut c[(out.i0 + r) * out.ldc + out.j0..][..out.width];
            if out.overwrite && k0 == 0 {
                // `+ 0.0` as `matrixmultiply`'s epilogue has it (`fma(1, acc, 0)`): a chain of products
                // that all underflowed to -0 is written +0.
                row.iter_mut().zip(lanes).for_each(|(c, s)| *c = s + 0.0);
            } else {
                row.iter_mut().zip(lanes).for_each(|(c, s)| *c += s);
            }
        }
        k0 = k1;
    }
}

#[cfg(test)]
mod tests {
    use super::Mat;
    use ndarray::ShapeBuilder;
    use ndarray::linalg::general_mat_mul;
    use ndarray::{ArrayView2, ArrayViewMut2};

    /// Every shape the trainer meets and the edges around them (a lone row or column, tile edges, `k`
    /// across one and two blocks), with `a` plain and transposed, overwriting and accumulating: the same
    /// bits as `general_mat_mul`.
    #[test]
    fn the_unpacked_gemm_is_matrixmultiplys_bits() {
        if !super::cpu_has_fma() {
            // Nothing to compare on this CPU: what must hold is that the trainer never picks this kernel
            // (the fallback's bits are `the_blocked_gemm_is_the_same_bits_on_any_thread_count`'s).
            assert!(!super::usable(1.0, 1.0, 64), "the FMA kernel offered on a CPU without FMA");
            return;
        }
        assert!(super::usable(1.0, 0.0, 64) && super::usable(1.0, 1.0, 1), "FMA here, yet the kernel is not used");
        assert!(!super::usable(0.5, 1.0, 64) && !super::usable(1.0, 2.0, 64) && !super::usable(1.0, 1.0, 0));
        let mut rng = crate::env::rng::SplitMix64::new(21);
        let mut fill = |len: usize| -> Vec<f32> {
            (0..len).map(|i| if i % 17 == 3 { 0.0 } else { (rng.next_f64() * 2.0 - 1.0) as f32 * 3.0 }).collect()
        };
        let mut compared = 0;
        for &m in &[1, 3, 4, 5, 30, 64] {
            for &k in &[1, 7, 61, 64, 256, 257, 600] {
                for &n in &[1, 5, 8, 15, 16, 17, 30, 61, 64] {
                    let (a, b, c0) = (fill(m * k), fill(k * n), fill(m * n));
                    for a_transposed in [false, true] {
                        let am = if a_transposed { Mat::row_major(&a, k, m).t() } else { Mat::row_major(&a, m, k) };
                        let av = ArrayView2::from_shape((m, k).strides((am.rs, am.cs)), &a[..]).unwrap();
                        let bv = ArrayView2::from_shape((k, n), &b[..]).unwrap();
                        for overwrite in [false, true] {
                            let mut want = c0.clone();
                            let beta = if overwrite { 0.0 } else { 1.0 };
                            general_mat_mul(
                                1.0,
                                &av,
                                &bv,
                                beta,
                                &mut ArrayViewMut2::from_shape((m, n), &mut want[..]).unwrap(),
                            );
                            let mut got = c0.clone();
                            super::gemm(am, Mat::row_major(&b, k, n), overwrite, &mut got);
                            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                            assert_eq!(
                                bits(&got),
                                bits(&want),
                                "{m}x{k}x{n}, a transposed {a_transposed}, overwrite {overwrite}"
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(compared, 6 * 7 * 9 * 4);
        // Products that underflow to -0, written over `c` (the weight gradient's and `dx`'s case): +0, as
        // `general_mat_mul` writes them, in a full tile and at the edges alike.
        let (m, k, n) = (5, 3, 19);
        let (a, b) = (vec![-1e-30f32; m * k], vec![1e-30f32; k * n]);
        let mut want = vec![f32::NAN; m * n];
        general_mat_mul(
            1.0,
            &ArrayView2::from_shape((m, k), &a[..]).unwrap(),
            &ArrayView2::from_shape((k, n), &b[..]).unwrap(),
            0.0,
            &mut ArrayViewMut2::from_shape((m, n), &mut want[..]).unwrap(),
        );
        let mut got = vec![f32::NAN; m * n];
        super::gemm(Mat::row_major(&a, m, k), Mat::row_major(&b, k, n), true, &mut got);
        assert!(want.iter().all(|x| x.to_bits() == 0), "general_mat_mul wrote {want:?}");
        assert!(got.iter().all(|x| x.to_bits() == 0), "wrote {got:?}");
    }

    #[test]
    fn a_transposed_copy_and_a_row_range_read_the_same_elements() {
        let data: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let m = Mat::row_major(&data, 3, 4);
        assert_eq!(m.t().to_row_major(), vec![0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]);
        assert_eq!(m.rows(1, 2).to_row_major(), data[4..].to_vec());
        assert_eq!(m.t().rows(2, 1).to_row_major(), vec![2., 6., 10.]);
        // A transposed matrix of more than eight rows (a ragged last block of them), against the plain copy.
        let big: Vec<f32> = (0..19 * 7).map(|i| i as f32).collect();
        let t = Mat::row_major(&big, 7, 19).t();
        let plain: Vec<f32> = (0..19).flat_map(|i| (0..7).map(move |j| (j * 19 + i) as f32)).collect();
        assert_eq!(t.to_row_major(), plain);
        assert!(!Mat { data: &data, rows: 4, cols: 4, rs: 4, cs: 1 }.fits());
    }
}
