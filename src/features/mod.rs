//! Features: one definition of the model inputs, shared by the training environment, the simulated broker
//! and the live engine.
//!
//! A [`FeatureSpec`] names the indicators and their parameters; [`FEATURE_VERSION`] changes whenever the
//! arithmetic does, and [`FeatureSpec::fingerprint`] goes into every model manifest so that a model is never
//! fed features it was not trained on. A [`FeatureState`] (one per symbol) takes one bar and returns one
//! row; [`batch`] runs that very state over a slice of bars, so the two paths are bit-identical by
//! construction. No row depends on a later bar. Rows before the warm-up is complete are marked not ready
//! and hold zeros.

mod indicators;
mod spec;
mod state;
pub(crate) mod windows;

pub use spec::{FEATURE_VERSION, FeatureSpec};
pub(crate) use state::FeatureState;

use crate::domain::Bar;

/// Feature rows of one symbol over a slice of bars: `values` is row-major, `n_cols` wide.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FeatureMatrix {
    pub n_cols: usize,
    pub values: Vec<f32>,
    pub ready: Vec<bool>,
}

impl FeatureMatrix {
    #[cfg(test)]
    pub(crate) fn rows(&self) -> usize {
        self.ready.len()
    }

    pub(crate) fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.n_cols..(i + 1) * self.n_cols]
    }
}

/// The batch path: the streaming state run over `bars` in order (the same arithmetic, the same order).
pub(crate) fn batch(spec: &FeatureSpec, bars: &[Bar]) -> FeatureMatrix {
    let mut state = FeatureState::new(spec.clone());
    let n_cols = spec.n_cols();
    let mut values = Vec::with_capacity(bars.len() * n_cols);
    let mut ready = Vec::with_capacity(bars.len());
    let mut row = vec![0.0f32; n_cols];
    for b in bars {
        ready.push(state.update_into(b.o, b.h, b.l, b.c, b.v, &mut row));
        values.extend_from_slice(&row);
    }
    FeatureMatrix { n_cols, values, ready }
}

#[cfg(test)]
pub(crate) mod tests;
