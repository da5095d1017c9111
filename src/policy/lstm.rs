//! `LstmPolicy`: the LSTM direction classifier (`x_fast [-1, fast_len, nf]`, `x_slow [-1, slow_len, ns]`,
//! `x_context [-1, nc]` -> `probs [-1, 3]` = P(down, flat, up)), as the LSTM model contract defines it.
//! The input shapes come from whoever builds the inputs (the live LSTM input builder), so a model whose
//! windows differ from the builder's is refused at load.

use super::{ModelSel, Pipeline, PolicyError, SessionOptions, fetch, session};
use crate::models::{Manifest, ModelKind, Registry, TensorSpec};
use ort::session::{HasSelectedOutputs, OutputSelector, RunOptions, Session};
use ort::value::Tensor;

pub(super) const FAST_INPUT: &str = "x_fast";
pub(super) const SLOW_INPUT: &str = "x_slow";
pub(super) const CONTEXT_INPUT: &str = "x_context";
pub(super) const PROBS_OUTPUT: &str = "probs";

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
    /// The three inputs in the graph's input order, each one ONNX Runtime value made at load whose data
    /// each call rewrites in place.
    inputs: [Tensor<f32>; 3],
    /// Where `x_fast`, `x_slow` and `x_context` are in `inputs`.
    at: [usize; 3],
    /// Runs with the `probs` output `[1, 3]` made at load, written in place by each call.
    run: RunOptions<HasSelectedOutputs>,
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
        let fail = |e: String| PolicyError::Session { id: m.id.clone(), reason: e };
        let names = [FAST_INPUT, SLOW_INPUT, CONTEXT_INPUT];
        let shapes_of = [
            vec![1, shapes.fast_len, shapes.n_fast],
            vec![1, shapes.slow_len, shapes.n_slow],
            vec![1, shapes.n_context],
        ];
        // `session` checked that the graph's inputs are exactly these three names; they are kept in its order.
        let (mut inputs, mut at) = (Vec::with_capacity(3), [0usize; 3]);
        for (g, input) in session.inputs().iter().enumerate() {
            let Some(k) = names.iter().position(|n| *n == input.name()) else {
                return Err(fail(format!("its graph has an input {} that is not one of {names:?}", input.name())));
            };
            at[k] = g;
            let n = shapes_of[k].iter().product();
            inputs.push(Tensor::from_array((shapes_of[k].clone(), vec![0.0f32; n])).map_err(|e| fail(e.to_string()))?);
        }
        let inputs: [Tensor<f32>; 3] =
            inputs.try_into().map_err(|_| fail(format!("its graph does not have the three inputs {names:?}")))?;
        let probs = Tensor::from_array(([1usize, 3], vec![0.0f32; 3])).map_err(|e| fail(e.to_string()))?;
        let outputs = OutputSelector::no_default().with(PROBS_OUTPUT).preallocate(PROBS_OUTPUT, probs);
        let run = RunOptions::new().map_err(|e| fail(e.to_string()))?.with_outputs(outputs);
        let mut p = LstmPolicy { manifest: m, session, inputs, at, run };
        let (f, s, c) = (shapes.fast_len * shapes.n_fast, shapes.slow_len * shapes.n_slow, shapes.n_context);
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

    /// One sample (row-major windows) in, [P(down), P(flat), P(up)] out; the windows are copied into the
    /// input values made at load and the probabilities read from the output value made at load.
    pub fn probs(&mut self, x_fast: &[f32], x_slow: &[f32], x_context: &[f32]) -> Result<[f32; 3], PolicyError> {
        let id = &self.manifest.id;
        let fail = |e: ort::Error| PolicyError::Inference { id: id.clone(), reason: e.to_string() };
        for (k, (name, src)) in
            [(FAST_INPUT, x_fast), (SLOW_INPUT, x_slow), (CONTEXT_INPUT, x_context)].into_iter().enumerate()
        {
            let dst = self.inputs[self.at[k]].try_extract_tensor_mut::<f32>().map_err(fail)?.1;
            copy_in(id, name, src, dst)?;
        }
        let [a, b, c] = &self.inputs;
        let res = self.session.run_with_options(ort::inputs![a, b, c], &self.run).map_err(fail)?;
        let y = match res.get(PROBS_OUTPUT) {
            Some(v) => v.try_extract_tensor::<f32>().map_err(fail)?.1,
            None => &[][..],
        };
        let out: [f32; 3] = y.try_into().map_err(|_| PolicyError::InputLen {
            id: id.clone(),
            name: PROBS_OUTPUT,
            got: y.len(),
            want: 3,
        })?;
        if out.iter().any(|v| !v.is_finite()) {
            return Err(PolicyError::NotFinite { id: id.clone(), output: out.to_vec() });
        }
        Ok(out)
    }
}

fn copy_in(id: &str, name: &'static str, src: &[f32], dst: &mut [f32]) -> Result<(), PolicyError> {
    if dst.len() != src.len() {
        return Err(PolicyError::InputLen { id: id.to_string(), name, got: src.len(), want: dst.len() });
    }
    dst.copy_from_slice(src);
    Ok(())
}
