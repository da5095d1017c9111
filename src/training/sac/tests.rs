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

/// `config` with a `[sac]` of `hidden` (the networks the test trainers build) and the seed `seed`.
fn trainer_for(config: &Config, seed: u64) -> Sac {
    let (a, f) = (config.market.symbols.len(), config.features.n_cols());
    let cfg = crate::config::SacConfig { seed, ..config.sac.clone() };
    Sac::new(cfg, 1 + a * (1 + f), a, 4, Device::Cpu).unwrap()
}

fn with_tail(dir: &std::path::Path, tail: &str) -> Config {
    let text = format!("state_dir = {:?}\n[market]\nsymbols = [\"AAPL\", \"MSFT\"]\n{tail}", dir.display().to_string());
    Config::parse(std::path::Path::new("test.toml"), &text).unwrap()
}

fn state_bits(sac: &Sac) -> Vec<(String, Vec<u32>)> {
    let bits = |t: &Tensor| Vec::<f32>::try_from(t.reshape([-1])).unwrap().iter().map(|x| x.to_bits()).collect();
    sac.state_variables().iter().map(|(n, t)| (n.clone(), bits(t))).collect()
}

/// A registered SAC policy keeps its training state (the actor, the critics and their targets, the
/// temperature, the observation statistics; no optimiser state), and `train sac --warm-start` loads all of
/// it into a fresh trainer of another seed: the same variables bit for bit, the same actions.
#[test]
fn a_sac_run_starts_from_a_sac_policys_kept_state_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let config = with_tail(dir.path(), "[sac]\nhidden = [32, 32]\n");
    let mut champ = trainer_for(&config, 5);
    let d = champ.norm.mean.size()[0];
    champ.norm.update(&(Tensor::randn([300, d], (Kind::Float, Device::Cpu)) * 3.0 + 1.5));
    let names: Vec<String> = champ.state_variables().into_iter().map(|(n, _)| n).collect();
    assert!(names.iter().all(|n| !n.split('.').any(|p| p == "adam")), "optimiser state kept: {names:?}");
    for part in ["pi.", "q.", "q_target.", "log_alpha", "obs_norm."] {
        assert!(names.iter().any(|n| n.starts_with(part)), "no {part} in the kept state: {names:?}");
    }
    let dates = (NaiveDate::from_ymd_opt(2001, 1, 2).unwrap(), NaiveDate::from_ymd_opt(2010, 12, 31).unwrap());
    let ran = Ran { requested: DeviceRequest::Cpu, device: "cpu".into(), env: EnvBackend::VecEnv };
    let id = register(&config, &champ, dates, None, 1.0, export_checked(&champ, &config).unwrap(), &ran).unwrap().id;

    let fresh = trainer_for(&config, 6);
    assert_ne!(state_bits(&fresh), state_bits(&champ), "another seed starts elsewhere");
    let w = warm_start(&config, &draft(&config, &fresh, dates, None, 0.0).unwrap(), &fresh, &id);
    assert!(w.warm, "{w:?}");
    assert_eq!(state_bits(&fresh), state_bits(&champ), "the kept state, bit for bit");
    let obs = Tensor::randn([8, d], (Kind::Float, Device::Cpu));
    assert!(fresh.act_deterministic(&obs).equal(&champ.act_deterministic(&obs)));
}

/// A SAC run cannot start from a PPO policy, nor from a SAC policy of another network: it trains from
/// scratch and says why.
#[test]
fn a_sac_run_refuses_a_ppo_policy_and_another_network_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = with_tail(dir.path(), "[sac]\nhidden = [32, 32]\n");
    let champ = trainer_for(&config, 5);
    let dates = (NaiveDate::from_ymd_opt(2001, 1, 2).unwrap(), NaiveDate::from_ymd_opt(2010, 12, 31).unwrap());
    let ran = Ran { requested: DeviceRequest::Cpu, device: "cpu".into(), env: EnvBackend::VecEnv };
    let id = register(&config, &champ, dates, None, 1.0, export_checked(&champ, &config).unwrap(), &ran).unwrap().id;
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    let ppo =
        crate::models::Manifest { algorithm: Algorithm::Ppo, ..draft(&config, &champ, dates, None, 1.0).unwrap() };
    let ppo_id = reg.add(b"a ppo policy", ppo).unwrap().id;
    let scratch = |config: &Config, id: &str| {
        let fresh = trainer_for(config, 6);
        let w = warm_start(config, &draft(config, &fresh, dates, None, 0.0).unwrap(), &fresh, id);
        assert!(!w.warm, "{w:?}");
        w.reason.unwrap_or_default()
    };
    let why = scratch(&config, &ppo_id);
    assert!(why.contains("is a ppo model: a SAC run can start only from a SAC policy"), "{why}");
    let wider = with_tail(dir.path(), "[sac]\nhidden = [16, 16]\n");
    let why = scratch(&wider, &id);
    assert!(why.contains("sac.hidden") && why.contains("another network"), "{why}");
}
