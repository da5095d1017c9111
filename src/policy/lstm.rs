//! `LstmPolicy`: the LSTM direction classifier (`x_fast [-1, fast_len, nf]`, `x_slow [-1, slow_len, ns]`,
//! `x_context [-1, nc]` -> `probs [-1, 3]` = P(down, flat, up)), as the LSTM model contract defines it.
//! The input shapes come from whoever builds the inputs (the live LSTM input builder), so a model whose
//! windows differ from the builder's is refused at load.

use super::{ModelSel, Pipeline, PolicyError, SessionOptions, fetch, session};
use crate::models::{Manifest, ModelKind, Registry, TensorSpec};
use ndarray::{Array2, Array3};
use ort::session::Session;
use ort::value::TensorRef;

pub const FAST_INPUT: &str = "x_fast";
pub const SLOW_INPUT: &str = "x_slow";
pub const CONTEXT_INPUT: &str = "x_context";
pub const PROBS_OUTPUT: &str = "probs";

/// The input shapes (batch dimension excluded) the pipeline's LSTM input builder produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmShapes {
    pub fast_len: usize,
    pub n_fast: usize,
    pub slow_len: usize,
    pub n_slow: usize,
    pub n_context: usize,
}

impl LstmShapes {
    pub fn specs(&self) -> [TensorSpec; 3] {
        let i = |v: usize| v as i64;
        [
            TensorSpec { name: FAST_INPUT.into(), shape: vec![-1, i(self.fast_len), i(self.n_fast)] },
            TensorSpec { name: SLOW_INPUT.into(), shape: vec![-1, i(self.slow_len), i(self.n_slow)] },
            TensorSpec { name: CONTEXT_INPUT.into(), shape: vec![-1, i(self.n_context)] },
        ]
    }
}

pub struct LstmPolicy {
    manifest: Manifest,
    session: Session,
    fast: Array3<f32>,
    slow: Array3<f32>,
    context: Array2<f32>,
}

impl std::fmt::Debug for LstmPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LstmPolicy").field("id", &self.manifest.id).finish()
    }
}

impl LstmPolicy {
    pub fn load(
        registry: &Registry,
        sel: &ModelSel,
        pipeline: &Pipeline,
        shapes: LstmShapes,
        opts: SessionOptions,
    ) -> Result<LstmPolicy, PolicyError> {
        let (m, bytes) = fetch(registry, sel, ModelKind::Lstm)?;
        Self::from_parts(m, &bytes, pipeline, shapes, opts)
    }

    pub fn from_parts(
        m: Manifest,
        bytes: &[u8],
        pipeline: &Pipeline,
        shapes: LstmShapes,
        opts: SessionOptions,
    ) -> Result<LstmPolicy, PolicyError> {
        m.check_inputs(&pipeline.features, &shapes.specs(), &pipeline.symbols, pipeline.timeframe)
            .map_err(|mismatch| PolicyError::Mismatch { id: m.id.clone(), mismatch })?;
        if !m.outputs.iter().any(|o| o.name == PROBS_OUTPUT && o.shape == [-1, 3]) {
            return Err(PolicyError::Contract {
                id: m.id.clone(),
                reason: format!("expected output {PROBS_OUTPUT} of shape [-1, 3], manifest has {:?}", m.outputs),
            });
        }
        let session = session(&m, bytes, opts)?;
        let mut p = LstmPolicy {
            manifest: m,
            session,
            fast: Array3::zeros((1, shapes.fast_len, shapes.n_fast)),
            slow: Array3::zeros((1, shapes.slow_len, shapes.n_slow)),
            context: Array2::zeros((1, shapes.n_context)),
        };
        let (f, s, c) = (p.fast.len(), p.slow.len(), p.context.len());
        p.probs(&vec![0.0; f], &vec![0.0; s], &vec![0.0; c])?;
        log::info!("policy: loaded LSTM model {}, warm-up done", p.manifest.id);
        Ok(p)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn id(&self) -> &str {
        &self.manifest.id
    }

    /// One sample (row-major windows) in, [P(down), P(flat), P(up)] out.
    pub fn probs(&mut self, x_fast: &[f32], x_slow: &[f32], x_context: &[f32]) -> Result<[f32; 3], PolicyError> {
        let id = self.manifest.id.clone();
        copy_in(&id, FAST_INPUT, x_fast, self.fast.as_slice_mut())?;
        copy_in(&id, SLOW_INPUT, x_slow, self.slow.as_slice_mut())?;
        copy_in(&id, CONTEXT_INPUT, x_context, self.context.as_slice_mut())?;
        let fail = |e: ort::Error| PolicyError::Inference { id: id.clone(), reason: e.to_string() };
        let f = TensorRef::from_array_view(self.fast.view()).map_err(fail)?;
        let s = TensorRef::from_array_view(self.slow.view()).map_err(fail)?;
        let c = TensorRef::from_array_view(self.context.view()).map_err(fail)?;
        let res = self.session.run(ort::inputs![FAST_INPUT => f, SLOW_INPUT => s, CONTEXT_INPUT => c]).map_err(fail)?;
        let (_, y) = res[PROBS_OUTPUT].try_extract_tensor::<f32>().map_err(fail)?;
        let out: [f32; 3] = y.try_into().map_err(|_| PolicyError::InputLen {
            id: id.clone(),
            name: PROBS_OUTPUT,
            got: y.len(),
            want: 3,
        })?;
        if out.iter().any(|v| !v.is_finite()) {
            return Err(PolicyError::NotFinite { id, output: out.to_vec() });
        }
        Ok(out)
    }
}

fn copy_in(id: &str, name: &'static str, src: &[f32], dst: Option<&mut [f32]>) -> Result<(), PolicyError> {
    match dst {
        Some(d) if d.len() == src.len() => {
            d.copy_from_slice(src);
            Ok(())
        }
        d => Err(PolicyError::InputLen { id: id.to_string(), name, got: src.len(), want: d.map_or(0, |d| d.len()) }),
    }
}
