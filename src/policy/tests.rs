//! Policies loaded from a temporary registry: small PPO models written with `onnx::MlpPolicy` (random
//! weights), checked against the reference forward; mismatches refused; a champion that fits loads.

use super::*;
use crate::domain::Timeframe;
use crate::env::EnvConfig;
use crate::models::TensorSpec;
use crate::onnx::mlp::{MlpPolicy, Squash};
use crate::onnx::{Activation, Dense};

/// A small deterministic generator (xorshift64*), uniform in [-a, a).
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self, a: f32) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let u = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
        (u * 2.0 - 1.0) * a
    }

    pub(crate) fn dense(&mut self, i: usize, o: usize, a: f32) -> Dense {
        Dense {
            in_dim: i,
            out_dim: o,
            weight: (0..i * o).map(|_| self.next(a)).collect(),
            bias: (0..o).map(|_| self.next(a)).collect(),
        }
    }
}

/// A random PPO policy for `pipeline` (no observation normalisation, tanh, actions clipped to [-1, 1]).
pub(crate) fn random_ppo(pipeline: &Pipeline, seed: u64) -> MlpPolicy {
    let mut rng = Rng(seed | 1);
    let d = PpoPolicy::obs_dim_for(pipeline);
    let a = pipeline.symbols.len();
    MlpPolicy {
        norm: None,
        hidden: vec![rng.dense(d, 16, 1.0)],
        activation: Activation::Tanh,
        head: rng.dense(16, a, 1.5),
        squash: Squash::Clip(1.0),
    }
}

/// Registers `p` as a PPO model for `pipeline` and makes it the champion.
pub(crate) fn register_ppo(reg: &Registry, pipeline: &Pipeline, p: &MlpPolicy, env: &EnvConfig) -> Manifest {
    let bytes = p.to_onnx("obs", "action", &[]).expect("a valid test policy");
    let mut params = std::collections::BTreeMap::new();
    params.insert("env".to_string(), serde_json::to_value(env).expect("env config serialises"));
    let draft = Manifest {
        params,
        ..Manifest::draft(
            ModelKind::Ppo,
            pipeline.features.clone(),
            vec![TensorSpec { name: "obs".into(), shape: vec![-1, p.obs_dim() as i64] }],
            vec![TensorSpec { name: "action".into(), shape: vec![-1, p.act_dim() as i64] }],
            pipeline.symbols.clone(),
            Timeframe::DAY1,
        )
    };
    let m = reg.add(&bytes, draft).expect("registered");
    reg.promote(&m.id, "test").expect("promoted")
}

pub(crate) fn pipeline(symbols: &[&str]) -> Pipeline {
    let syms: Vec<_> = symbols.iter().map(|s| crate::domain::Symbol::new(s).expect("symbol")).collect();
    Pipeline::new(&crate::features::FeatureSpec::default(), &syms, Timeframe::DAY1)
}

#[test]
fn champion_loads_and_matches_the_reference_forward() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    let pl = pipeline(&["AAPL", "MSFT"]);
    let mlp = random_ppo(&pl, 42);
    let m = register_ppo(&reg, &pl, &mlp, &EnvConfig::default());
    let mut p = PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap();
    assert_eq!(p.id(), m.id);
    assert_eq!(p.env_params().map(|e| e.0), Some(EnvConfig::default().initial_cash));
    let mut rng = Rng(9);
    for _ in 0..20 {
        let obs: Vec<f32> = (0..p.obs_dim()).map(|_| rng.next(2.0)).collect();
        let got = p.act(&obs).unwrap();
        let want = mlp.forward(&obs);
        assert_eq!(got.len(), 2);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5, "ort {g} vs reference {w}");
        }
    }
    assert!(matches!(p.act(&[0.0; 3]), Err(PolicyError::InputLen { .. })));
}

#[test]
fn mismatches_are_refused_and_a_fitting_champion_loads() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    let pl = pipeline(&["AAPL", "MSFT"]);
    let m = register_ppo(&reg, &pl, &random_ppo(&pl, 1), &EnvConfig::default());
    let mut running = PpoPolicy::load(&reg, &ModelSel::Id(m.id.clone()), &pl, SessionOptions::default()).unwrap();

    // Another symbol set: the manifest's symbols and obs width no longer fit.
    let other = pipeline(&["AAPL", "MSFT", "IBM"]);
    let e = PpoPolicy::load(&reg, &ModelSel::Id(m.id.clone()), &other, SessionOptions::default()).unwrap_err();
    assert!(matches!(e, PolicyError::Mismatch { .. }), "{e}");
    // A newer feature version.
    let mut v2 = pl.clone();
    v2.features.version += 1;
    let e = PpoPolicy::load(&reg, &ModelSel::Champion, &v2, SessionOptions::default()).unwrap_err();
    assert!(e.to_string().contains("feature version"), "{e}");
    // Unknown id, and a PPO model loaded as an LSTM.
    let e = PpoPolicy::load(&reg, &ModelSel::Id("ppo-nope".into()), &pl, SessionOptions::default()).unwrap_err();
    assert!(matches!(e, PolicyError::Registry(_)), "{e}");
    let shapes = LstmShapes { fast_len: 4, n_fast: 2, slow_len: 2, n_slow: 2, n_context: 1 };
    let e = LstmPolicy::load(&reg, &ModelSel::Id(m.id.clone()), &pl, shapes, SessionOptions::default()).unwrap_err();
    assert!(matches!(e, PolicyError::WrongKind { .. }), "{e}");

    // A failed load leaves the loaded model as it was; a later champion that fits loads.
    assert_eq!(running.id(), m.id);
    assert!(running.act(&vec![0.0; running.obs_dim()]).is_ok());
    let m2 = register_ppo(&reg, &pl, &random_ppo(&pl, 2), &EnvConfig::default());
    let next = PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap();
    assert_eq!(next.id(), m2.id);
}

#[test]
fn a_manifest_that_lies_about_the_graph_is_refused() {
    let pl = pipeline(&["AAPL"]);
    let mlp = random_ppo(&pl, 3);
    let bytes = mlp.to_onnx("x", "action", &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    let good = register_ppo(&reg, &pl, &mlp, &EnvConfig::default());
    let e = PpoPolicy::from_parts(good, &bytes, &pl, SessionOptions::default()).unwrap_err();
    assert!(matches!(e, PolicyError::Contract { .. }), "{e}");
}

#[test]
fn latest_selects_the_model_trained_last_and_champion_the_champion() {
    assert_eq!(ModelSel::parse(None), ModelSel::Champion);
    assert_eq!(ModelSel::parse(Some("champion")), ModelSel::Champion);
    assert_eq!(ModelSel::parse(Some("latest")), ModelSel::Latest);
    assert_eq!(ModelSel::parse(Some("ppo-00")), ModelSel::Id("ppo-00".into()));
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    let draft = |day: u32| {
        let mut m = Manifest::draft(
            ModelKind::Ppo,
            FeatureRef { version: 1, names: vec!["f".into()] },
            vec![],
            vec![],
            vec![],
            Timeframe::DAY1,
        );
        m.created_at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2024, 1, day, 0, 0, 0).unwrap();
        m
    };
    assert!(matches!(fetch(&reg, &ModelSel::Latest, ModelKind::Ppo), Err(PolicyError::NoModel { .. })));
    let champion = reg.add(b"champion", draft(1)).unwrap();
    let newer = reg.add(b"trained later", draft(2)).unwrap();
    reg.promote(&champion.id, "test").unwrap();
    assert_eq!(fetch(&reg, &ModelSel::Latest, ModelKind::Ppo).unwrap().0.id, newer.id);
    assert_eq!(fetch(&reg, &ModelSel::Champion, ModelKind::Ppo).unwrap().0.id, champion.id);
}

/// The engine loads its PPO model through `PpoPolicy::load` with the config's action space: a model
/// trained in the other action space is refused at load, the message naming both.
#[test]
fn a_model_of_another_action_space_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    let shares = pipeline(&["AAPL", "MSFT"]);
    let weights_space = crate::exec::ActionSpace::Weights { band: 0.05, max_weight: 0.6 };
    let weights = shares.clone().with_action(weights_space);
    let env =
        EnvConfig { action: crate::exec::ActionSpace::Weights { band: 0.02, max_weight: 1.0 }, ..Default::default() };
    let m = register_ppo(&reg, &shares, &random_ppo(&shares, 3), &env);
    assert_eq!(manifest_action_space(&m), Ok(env.action), "the manifest says which action space");
    let e = PpoPolicy::load(&reg, &ModelSel::Champion, &shares, SessionOptions::default()).unwrap_err().to_string();
    assert!(
        e.contains(&m.id)
            && e.contains("trained in the weights action space")
            && e.contains("env.action_space is \"shares\""),
        "{e}"
    );
    // The same kind loads, trading with the config's band and cap.
    let p = PpoPolicy::load(&reg, &ModelSel::Champion, &weights, SessionOptions::default()).unwrap();
    assert_eq!(p.action_space(), weights_space);
    // A share-count model (or one whose manifest predates the choice) under a weights config.
    let old = register_ppo(&reg, &shares, &random_ppo(&shares, 4), &EnvConfig::default());
    let e = PpoPolicy::load(&reg, &ModelSel::Id(old.id), &weights, SessionOptions::default()).unwrap_err().to_string();
    assert!(e.contains("trained in the shares action space") && e.contains("is \"weights\""), "{e}");
    let mut bare = m.clone();
    bare.params.clear();
    assert_eq!(manifest_action_space(&bare), Ok(crate::exec::ActionSpace::Shares));
}

/// Counts the calling thread's heap allocations (Rust's; ONNX Runtime's C++ ones go to `malloc` directly),
/// for the no-allocation check below. Only in this crate's unit tests; it forwards to the system allocator.
// A global allocator is an `unsafe` trait: there is no safe way to count allocations.
#[allow(unsafe_code)]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    pub(super) struct Counting;

    // SAFETY: every call forwards to `System` unchanged; the counter is a const-initialised thread local
    // (no allocation, no destructor).
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCS.with(|c| c.set(c.get() + 1));
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            ALLOCS.with(|c| c.set(c.get() + 1));
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ALLOCS.with(|c| c.set(c.get() + 1));
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Heap allocations made on this thread so far.
    pub(super) fn allocations() -> u64 {
        ALLOCS.with(Cell::get)
    }
}

/// A call reuses the input and output values made at load: it makes no heap allocation of its own (one
/// used to make both values and read the output's type information back, 10 or so allocations a call),
/// and its actions are bit for bit those of a plain `run` on a session of the same options.
#[test]
fn a_call_allocates_nothing_and_gives_the_same_bits_as_a_plain_run() {
    let dir = tempfile::tempdir().unwrap();
    let reg = Registry::open(dir.path()).unwrap();
    let pl = pipeline(&["AAPL", "MSFT", "IBM"]);
    let mlp = random_ppo(&pl, 11);
    register_ppo(&reg, &pl, &mlp, &EnvConfig::default());
    let mut p = PpoPolicy::load(&reg, &ModelSel::Champion, &pl, SessionOptions::default()).unwrap();
    let mut rng = Rng(5);
    let rows: Vec<Vec<f32>> = (0..50).map(|_| (0..p.obs_dim()).map(|_| rng.next(3.0)).collect()).collect();
    let mut out = vec![0.0f32; 3];
    let mut got = Vec::with_capacity(rows.len() * 3);
    let before = counting::allocations();
    for r in &rows {
        p.act_into(r, &mut out).unwrap();
        got.extend_from_slice(&out);
    }
    let made = counting::allocations() - before;
    assert_eq!(made, 0, "heap allocations in {} calls", rows.len());

    let bytes = mlp.to_onnx("obs", "action", &[]).unwrap();
    let (m, _) = fetch(&reg, &ModelSel::Champion, ModelKind::Ppo).unwrap();
    let mut plain = session(&m, &bytes, SessionOptions::default()).unwrap();
    for (r, g) in rows.iter().zip(got.chunks(3)) {
        let x = ndarray::Array2::from_shape_vec((1, r.len()), r.clone()).unwrap();
        let input = ort::value::TensorRef::from_array_view(x.view()).unwrap();
        let res = plain.run(ort::inputs!["obs" => input]).unwrap();
        let want = res["action"].try_extract_tensor::<f32>().unwrap().1.to_vec();
        assert_eq!(
            g.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
}
