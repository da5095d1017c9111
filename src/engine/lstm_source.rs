//! `LstmProbs`: the engine's `ProbSource` for the LSTM classifier. Each symbol has its own
//! `features::windows::WindowStream` (the same code that built the training windows, one bar in), and the
//! latest window of each symbol goes through `policy::LstmPolicy` when the strategy asks.

use super::strategy::ProbSource;
use crate::domain::{Bar, Symbol, Timeframe};
use crate::features::FeatureSpec;
use crate::features::windows::{WindowInputs, WindowSpec, WindowStream, context_names};
use crate::models::{Manifest, Registry};
use crate::policy::{LstmPolicy, LstmShapes, ModelSel, Pipeline, PolicyError, SessionOptions};
use std::collections::HashMap;

/// The LSTM model's probability source: the windows of every symbol, streamed bar by bar, and the model run on them.
pub struct LstmProbs {
    policy: LstmPolicy,
    spec: FeatureSpec,
    window: WindowSpec,
    streams: HashMap<Symbol, WindowStream>,
    latest: HashMap<Symbol, WindowInputs>,
    /// The model's (up, down) cut-offs, read from its manifest once per model, not per bar.
    cutoffs: (Option<f32>, Option<f32>),
}

/// The (up, down) cut-offs a model's manifest carries.
fn manifest_cutoffs(policy: &LstmPolicy) -> (Option<f32>, Option<f32>) {
    let p = &policy.manifest().params;
    let read = |k: &str| p.get(k).and_then(|v| v.as_f64()).map(|v| v as f32).filter(|v| *v > 0.0 && *v <= 1.0);
    (read(super::cutoffs::UP_PARAM), read(super::cutoffs::DOWN_PARAM))
}

/// The window a model was trained with: its manifest's `fast_len`, `slow_len`, `slow_factor` and
/// `horizon` (training sizes them to its data, at most `[lstm]`'s), each `configured`'s where the manifest
/// has none (older models).
pub fn model_window(m: &Manifest, configured: WindowSpec) -> WindowSpec {
    let read = |k: &str, v: usize| {
        m.params.get(k).and_then(|x| x.as_u64()).and_then(|x| usize::try_from(x).ok()).filter(|x| *x >= 1).unwrap_or(v)
    };
    WindowSpec {
        fast_len: read("fast_len", configured.fast_len),
        slow_len: read("slow_len", configured.slow_len),
        slow_factor: read("slow_factor", configured.slow_factor),
        horizon: read("horizon", configured.horizon),
        ..configured
    }
}

/// The input shapes the running pipeline's window builder produces.
pub fn shapes(spec: &FeatureSpec, w: &WindowSpec) -> LstmShapes {
    let nf = spec.n_cols();
    LstmShapes {
        fast_len: w.fast_len,
        n_fast: nf,
        slow_len: w.slow_len,
        n_slow: nf,
        n_context: context_names(spec).len(),
    }
}

impl LstmProbs {
    /// A source for `policy` with the feature set and the windows it was trained on; its cut-offs are read from its
    /// manifest here.
    pub fn new(policy: LstmPolicy, spec: FeatureSpec, window: WindowSpec) -> Self {
        let cutoffs = manifest_cutoffs(&policy);
        LstmProbs { policy, spec, window, streams: HashMap::new(), latest: HashMap::new(), cutoffs }
    }

    /// Loads the selected LSTM model, checked against the pipeline (features, symbols, window shapes). The
    /// windows are the model's own (`model_window`), `window` where its manifest does not say.
    pub fn load(
        registry: &Registry,
        sel: &ModelSel,
        spec: &FeatureSpec,
        window: WindowSpec,
        symbols: &[Symbol],
        timeframe: Timeframe,
    ) -> Result<Self, PolicyError> {
        let pipeline = Pipeline::new(spec, symbols, timeframe);
        let (m, bytes) = crate::policy::fetch(registry, sel, crate::models::ModelKind::Lstm)?;
        let window = model_window(&m, window);
        let policy = LstmPolicy::from_parts(m, &bytes, &pipeline, shapes(spec, &window), SessionOptions::default())?;
        Ok(Self::new(policy, spec.clone(), window))
    }
}

impl ProbSource for LstmProbs {
    fn on_bar(&mut self, bar: &Bar) {
        let stream =
            self.streams.entry(bar.symbol.clone()).or_insert_with(|| WindowStream::new(self.spec.clone(), self.window));
        match stream.push(bar) {
            Some(w) => {
                self.latest.insert(bar.symbol.clone(), w);
            }
            None => {
                self.latest.remove(&bar.symbol);
            }
        }
    }

    fn probs(&mut self, symbol: &Symbol) -> Option<Result<[f32; 3], PolicyError>> {
        let w = self.latest.get(symbol)?;
        Some(self.policy.probs(&w.fast, &w.slow, &w.context))
    }

    fn model_id(&self) -> String {
        self.policy.id().to_string()
    }

    fn cutoffs(&self) -> (Option<f32>, Option<f32>) {
        self.cutoffs
    }

    /// Replaces the model, keeping the windows (the features do not depend on the model).
    fn set_lstm(&mut self, policy: LstmPolicy) -> bool {
        self.cutoffs = manifest_cutoffs(&policy);
        self.policy = policy;
        true
    }

    fn lstm_window(&self) -> Option<WindowSpec> {
        Some(self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{FeatureRef, ModelKind};

    #[test]
    fn a_model_is_read_with_the_windows_its_manifest_names_else_the_configured_ones() {
        let configured = crate::config::LstmConfig::default().window_spec();
        let mut m = Manifest::draft(
            ModelKind::Lstm,
            FeatureRef { version: 1, names: vec![] },
            vec![],
            vec![],
            vec![],
            Timeframe::DAY1,
        );
        assert_eq!(model_window(&m, configured), configured, "an older manifest without the keys");
        for (k, v) in [("fast_len", 30), ("slow_len", 2), ("slow_factor", 2), ("horizon", 2)] {
            m.params.insert(k.into(), serde_json::json!(v));
        }
        let sized = WindowSpec { slow_len: 2, slow_factor: 2, horizon: 2, ..configured };
        assert_eq!(model_window(&m, configured), sized);
        assert_eq!(shapes(&FeatureSpec::default(), &sized).slow_len, 2);
    }
}
