//! Warm start: the training state kept with a registered policy reads back bit for bit; a run started
//! from it exports the champion's actor before any step and begins its first update at the champion's
//! parameters; a missing, corrupt or mismatched state trains from scratch with the reason.

use super::*;
use crate::config::PpoConfig;
use crate::models::Algorithm;
use crate::rl::cartpole::CartPole;
use crate::training::device::{DeviceRequest, EnvBackend, Ran};
use crate::training::ppo::{draft, register};
use chrono::NaiveDate;
use tch::Kind;

fn config(dir: &Path, tail: &str) -> Config {
    let text = format!("state_dir = {:?}\n[market]\nsymbols = [\"AAPL\", \"MSFT\"]\n{tail}", dir.display().to_string());
    Config::parse(Path::new("test.toml"), &text).unwrap()
}

const SMALL: &str = "[ppo]\nhidden = [32, 32]\n";

fn ran() -> Ran {
    Ran { requested: DeviceRequest::Cpu, device: "cpu".into(), env: EnvBackend::VecEnv }
}

fn dates() -> (NaiveDate, NaiveDate) {
    (NaiveDate::from_ymd_opt(2001, 1, 2).unwrap(), NaiveDate::from_ymd_opt(2010, 12, 31).unwrap())
}

/// A fresh trainer for `config`'s observations and actions, seeded with `seed`.
fn trainer(config: &Config, seed: u64) -> Ppo {
    let (a, f) = (config.market.symbols.len(), config.features.n_cols());
    Ppo::new(PpoConfig { seed, ..config.ppo.clone() }, 1 + a * (1 + f), a, Device::Cpu).unwrap()
}

/// A "trained" champion: weights and observation statistics moved off any fresh initialisation.
fn champion(config: &Config) -> Ppo {
    let ppo = trainer(config, 3);
    tch::no_grad(|| {
        for (name, mut t) in ppo.vs.variables() {
            if !crate::ml::optim::Adam::is_state(&name) && !name.starts_with("obs_norm") {
                let _ = t.g_add_(&(t.randn_like() * 0.05));
            }
        }
    });
    let mut ppo = ppo;
    let d = ppo.norm.mean.size()[0];
    ppo.norm.update(&(Tensor::randn([400, d], (Kind::Float, Device::Cpu)) * 3.0 + 1.5));
    ppo
}

fn onnx(ppo: &Ppo) -> Vec<u8> {
    ppo.export_policy(Some(1.0)).unwrap().to_onnx("obs", "action", &[]).unwrap()
}

/// Registers `ppo` as `tradebot train ppo` does (its training state kept beside it); returns its id.
fn register_champion(config: &Config, ppo: &Ppo) -> String {
    register(config, ppo, dates(), None, 1.0, (0.0, onnx(ppo)), &ran()).unwrap().id
}

/// Every kept variable's bits, by name.
fn bits(ppo: &Ppo) -> Vec<(String, Vec<u32>)> {
    kept_variables(ppo)
        .into_iter()
        .map(|(n, t)| (n, Vec::<f32>::try_from(t.reshape([-1])).unwrap().into_iter().map(f32::to_bits).collect()))
        .collect()
}

#[test]
fn a_registered_policy_keeps_its_training_state_and_it_reads_back_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), SMALL);
    let champ = champion(&config);
    let id = register_champion(&config, &champ);
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    let (m, path) = reg.training_state(&id).unwrap();
    assert_eq!(path, config.state_dir.join("models").join(&id).join(crate::models::STATE_FILE));
    let sref = crate::models::StateRef::in_manifest(&m).unwrap().expect("the manifest names the state");
    assert_eq!(sref.sha256, crate::models::registry::sha256_hex(&std::fs::read(&path).unwrap()));
    let other = trainer(&config, 9);
    assert_ne!(bits(&other), bits(&champ), "a fresh trainer differs from the champion");
    load_state(&other, &path).unwrap();
    let (want, got) = (bits(&champ), bits(&other));
    assert!(want.iter().any(|(n, _)| n.starts_with("pi.")) && want.iter().any(|(n, _)| n.starts_with("vf.")));
    assert!(want.iter().any(|(n, _)| n == "obs_norm.mean"), "{:?}", want.iter().map(|w| &w.0));
    assert_eq!(got, want, "actor, critic, log-std and observation statistics read back bit for bit");
}

#[test]
fn a_warm_start_with_no_extra_steps_exports_the_champions_actor() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), SMALL);
    let champ = champion(&config);
    let id = register_champion(&config, &champ);
    let candidate = trainer(&config, 12);
    assert_ne!(onnx(&candidate), onnx(&champ));
    let w = warm(&config, &candidate, &id);
    assert_eq!(w, WarmStart { champion: Some(id.clone()), warm: true, reason: None });
    assert_eq!(onnx(&candidate), onnx(&champ), "the exported actor (normalisation included) is the champion's");
    assert_eq!(bits(&candidate), bits(&champ), "the critic too");
}

#[test]
fn the_first_update_of_a_warm_start_begins_at_the_champions_parameters() {
    let small = PpoConfig { hidden: vec![32, 32], n_steps: 32, batch_size: 64, n_epochs: 2, ..Default::default() };
    let flat = |p: &Ppo| -> Vec<f32> {
        let ps: Vec<Tensor> = p.model.parameters().iter().map(|t| t.reshape([-1])).collect();
        Vec::<f32>::try_from(Tensor::cat(&ps, 0)).unwrap()
    };
    let dist = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>().sqrt();
    let mut champ = Ppo::new(PpoConfig { seed: 1, ..small.clone() }, 4, 1, Device::Cpu).unwrap();
    champ.train(&mut CartPole::new(4, 1), 2 * 32 * 4, |_| true).unwrap();
    let file = tempfile::Builder::new().suffix(".safetensors").tempfile().unwrap();
    std::fs::write(file.path(), state_bytes(&champ).unwrap()).unwrap();

    let mut warm = Ppo::new(PpoConfig { seed: 2, ..small.clone() }, 4, 1, Device::Cpu).unwrap();
    load_state(&warm, file.path()).unwrap();
    assert_eq!(flat(&warm), flat(&champ), "loaded, before any update");
    warm.train(&mut CartPole::new(4, 2), 32 * 4, |_| true).unwrap();
    let mut scratch = Ppo::new(PpoConfig { seed: 2, ..small }, 4, 1, Device::Cpu).unwrap();
    scratch.train(&mut CartPole::new(4, 2), 32 * 4, |_| true).unwrap();
    let (moved, apart) = (dist(&flat(&warm), &flat(&champ)), dist(&flat(&scratch), &flat(&champ)));
    assert!(moved > 0.0, "the warm-started run trained");
    assert!(
        moved * 20.0 < apart,
        "one update from the champion stays near it ({moved}), a scratch run is {apart} away"
    );
    assert_eq!(warm.updates, 1, "the run counts its own updates");
}

#[test]
fn a_missing_corrupt_or_mismatched_state_trains_from_scratch_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), SMALL);
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    let champ = champion(&config);
    let scratch = |c: &Config, id: &str| {
        let p = trainer(c, 4);
        let before = bits(&p);
        let w = warm(c, &p, id);
        assert!(!w.warm, "{w:?}");
        assert_eq!(w.champion.as_deref(), Some(id));
        assert_eq!(bits(&p), before, "a refused warm start leaves the fresh network as it was");
        w.reason.unwrap()
    };
    let no_state = reg.add(&onnx(&champ), draft(&config, &champ, dates(), None, 1.0).unwrap()).unwrap().id;
    let why = scratch(&config, &no_state);
    assert!(why.contains("has no training state") && why.contains(&no_state), "{why}");
    assert!(scratch(&config, "ppo-0000000000000000").contains("no such model"));

    let id = register_champion(&config, &trainer(&config, 8));
    let file = config.state_dir.join("models").join(&id).join(crate::models::STATE_FILE);
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let why = scratch(&config, &id);
    assert!(why.contains("corrupt") && why.contains("SHA-256"), "{why}");
    std::fs::remove_file(&file).unwrap();
    assert!(scratch(&config, &id).contains("is missing"));

    let id = register_champion(&config, &champ);
    let wider = config_with(&config, "[ppo]\nhidden = [16, 16]\n");
    let why = scratch(&wider, &id);
    assert!(why.contains("ppo.hidden") && why.contains("another network"), "{why}");
    let weights = config_with(&config, "[env]\naction_space = \"weights\"\n[ppo]\nhidden = [32, 32]\n");
    let why = scratch(&weights, &id);
    assert!(why.contains("env.action.kind") && why.contains("weights"), "{why}");
    let sac = Manifest { algorithm: Algorithm::Sac, ..draft(&config, &champ, dates(), None, 1.0).unwrap() };
    let sac_id = reg.add(b"sac policy", sac).unwrap().id;
    assert!(scratch(&config, &sac_id).contains("is a sac model"));
    // The same champion in the config it was trained under still warm-starts.
    assert!(warm(&config, &trainer(&config, 4), &id).warm);
}

/// `warm_start` as `tradebot train ppo` calls it: against the manifest this run's model would get.
fn warm(config: &Config, ppo: &Ppo, id: &str) -> WarmStart {
    warm_start(config, &draft(config, ppo, dates(), None, 0.0).unwrap(), ppo, id)
}

/// `config`'s state directory with another tail.
fn config_with(config: &Config, tail: &str) -> Config {
    self::config(&config.state_dir, tail)
}

#[test]
fn the_shipped_champion_warm_starts_under_the_demo_config_and_exports_its_own_onnx() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root.join("config/tradebot.toml")).unwrap();
    let text = text.replace("state_dir = \"./var\"", &format!("state_dir = {:?}", dir.path().display().to_string()));
    let config = Config::parse(Path::new("tradebot.toml"), &text).unwrap();
    let reg = Registry::open(&config.state_dir.join("models")).unwrap();
    reg.seed_from(&root.join("models")).unwrap();
    let id = "ppo-fee6be4c55483f7a";
    let candidate = trainer(&config, 77);
    assert_eq!(warm(&config, &candidate, id), WarmStart { champion: Some(id.into()), warm: true, reason: None });
    let bytes =
        candidate.export_policy(Some(1.0)).unwrap().to_onnx("obs", "action", &[("producer", "tradebot train ppo")]);
    assert_eq!(bytes.unwrap(), reg.load(id).unwrap().1, "the kept state is the shipped policy, bit for bit");
}
