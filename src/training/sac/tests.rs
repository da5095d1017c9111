//! SAC's export: ONNX Runtime against tch within 1e-5, and the registered model served by the engine's
//! policy path (`PpoPolicy`) with the same actions.

use super::*;
use crate::models::{ModelKind, Registry};
use crate::policy::{Pipeline, PpoPolicy, SessionOptions};
use crate::training::device::DeviceRequest;

fn config(dir: &std::path::Path) -> Config {
    let text = format!("state_dir = {:?}\n[market]\nsymbols = [\"AAPL\", \"MSFT\"]\n", dir.display().to_string());
    Config::parse(std::path::Path::new("test.toml"), &text).unwrap()
}

/// A small SAC for `config`'s observation, its statistics fed with skewed data so that the normalisation
/// in the graph matters.
fn small_sac(config: &Config) -> Sac {
    let (a, f) = (config.market.symbols.len(), config.features.n_cols());
    let d = 1 + a * (1 + f);
    let cfg = crate::config::SacConfig { hidden: vec![32, 32], seed: 5, ..Default::default() };
    let mut sac = Sac::new(cfg, d, a, 4, Device::Cpu).unwrap();
    let data = Tensor::randn([500, d as i64], (Kind::Float, Device::Cpu)) * 3.0 + 1.5;
    sac.norm.update(&data);
    sac
}

#[test]
fn the_sac_onnx_export_equals_tch_within_1e_5_and_serves_through_the_policy_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let sac = small_sac(&config);
    let (max_diff, bytes) = export_checked(&sac, &config).unwrap();
    assert!(max_diff <= PARITY_TOLERANCE, "{max_diff}");
    // The plain-Rust reference of the exported graph agrees with tch too.
    let d = sac.export_policy().unwrap().obs_dim();
    let obs: Vec<f32> = (0..d).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
    let want = sac.act_deterministic(&Tensor::from_slice(&obs).view([1, d as i64]));
    let want = Vec::<f32>::try_from(want.reshape([-1])).unwrap();
    let reference = sac.export_policy().unwrap().forward(&obs);
    assert!(want.iter().zip(&reference).all(|(w, r)| (w - r).abs() < 1e-5), "{want:?} vs {reference:?}");
    assert!(want.iter().all(|w| w.abs() < 1.0) && want.iter().any(|w| w.abs() > 1e-3), "tanh of a live head: {want:?}");

    let dates = (NaiveDate::from_ymd_opt(2001, 1, 2).unwrap(), NaiveDate::from_ymd_opt(2010, 12, 31).unwrap());
    let ran = Ran { requested: DeviceRequest::Cpu, device: "cpu".into(), env: EnvBackend::VecEnv };
    let m = register(&config, &sac, dates, None, 1.0, (max_diff, bytes), &ran).unwrap();
    assert!(m.id.starts_with("sac-"), "{}", m.id);
    assert_eq!((m.kind, m.algorithm), (ModelKind::Ppo, Algorithm::Sac));
    assert!(m.params.contains_key("sac") && m.params.contains_key("env"));
    // The engine's policy path loads it by id and acts as tch does.
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    let pl = Pipeline::new(&config.features, &config.market.symbols, config.market.timeframe);
    let sel = crate::policy::ModelSel::Id(m.id.clone());
    let mut policy = PpoPolicy::load(&reg, &sel, &pl, SessionOptions::default()).unwrap();
    let served = policy.act(&obs).unwrap();
    assert!(served.iter().zip(&want).all(|(s, w)| (s - w).abs() < 1e-5), "{served:?} vs {want:?}");
    assert_eq!(reg.get(&m.id).unwrap().algorithm, Algorithm::Sac, "the manifest on disk names the algorithm");
}
