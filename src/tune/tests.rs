//! A trial's weights do not depend on the trials beside it; a search is the same for the same seed; the
//! configured space is what is searched.

use super::space;
use crate::config::{Config, Dist, TuneConfig};
use crate::models::Algorithm;
use std::collections::BTreeMap;
use std::path::Path;

/// The demo config with its state in `dir`, 4 short episodes at once, two years of training data.
fn small_config(dir: &Path) -> Config {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut s = std::fs::read_to_string(root.join("config/tradebot.toml")).unwrap();
    let state = format!("state_dir = {:?}", dir.join("state").display().to_string());
    for (a, b) in [
        ("state_dir = \"./var\"", state.as_str()),
        ("[env]\n", "[env]\nn_envs = 4\nepisode_len = 40\n"),
        // The demo's own search sizing: these tests set their own.
        ("trials = 8\nparallel = 2\nbudget_steps = 32768\nalgorithms = [\"ppo\", \"sac\"]\n", ""),
        ("window_days = 3650\nholdout_days = 365", "from = \"2005-01-01\"\nto = \"2007-06-30\""),
    ] {
        assert!(s.contains(a), "the demo config lost {a:?}");
        s = s.replacen(a, b, 1);
    }
    assert!(s.contains("[tune]\n"), "the demo config lost [tune]");
    s = s.replacen(
        "[tune]\n",
        "[tune]\nvalidation_days = 60\nbudget_steps = 192\nmin_steps = 64\nreduction = 3\nseed = 11\n\
         ",
        1,
    );
    s.push_str(
        "\n[tune.space]\nlearning_rate = { kind = \"log\", low = 1e-4, high = 3e-3 }\n\
         n_steps = { kind = \"choice\", values = [8, 16] }\nbatch_size = { kind = \"choice\", values = [16, 32] }\n\
         n_epochs = { kind = \"int\", low = 1, high = 3 }\nwidth = { kind = \"choice\", values = [8, 16] }\n\
         depth = { kind = \"int\", low = 1, high = 2 }\ngamma = { kind = \"linear\", low = 0.9, high = 0.99 }\n",
    );
    Config::parse(&dir.join("tradebot.toml"), &s).unwrap()
}

#[test]
fn random_draws_stay_in_the_space_and_apply_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let c = small_config(dir.path());
    let space = c.tune.space();
    for n in 0..50 {
        let p = space::random(&space, 3, n);
        assert_eq!(p, space::random(&space, 3, n), "the same seed and number give the same draw");
        let applied = space::apply(&c, &p, space::trial_seed(3, n)).unwrap();
        assert!((1e-4..=3e-3).contains(&applied.ppo.learning_rate));
        assert!([8, 16].contains(&applied.ppo.n_steps) && [16, 32].contains(&applied.ppo.batch_size));
        assert!((1..=3).contains(&applied.ppo.n_epochs));
        assert!((1..=2).contains(&applied.ppo.hidden.len()) && [8, 16].contains(&applied.ppo.hidden[0]));
        assert_eq!(applied.ppo.seed, applied.env.seed);
    }
    assert_ne!(space::random(&space, 3, 0), space::random(&space, 4, 0), "another seed, other draws");
    assert_ne!(space::trial_seed(3, 0), space::trial_seed(3, 1));
}

#[test]
fn a_bad_space_is_refused_with_the_key() {
    let bad = |name: &str, d: Dist| {
        let t = TuneConfig { space: BTreeMap::from([(name.to_string(), d)]), ..Default::default() };
        t.validate().unwrap_err().to_string()
    };
    assert!(bad("momentum", Dist::Linear { low: 0.0, high: 1.0 }).contains("tune.space.momentum: not a tunable"));
    assert!(bad("learning_rate", Dist::Log { low: 0.0, high: 1.0 }).contains("0 < low < high"));
    assert!(bad("width", Dist::Choice { values: vec![] }).contains("tune.space.width"));
    assert!(bad("algorithm", Dist::Choice { values: vec![0.0, 1.0] }).contains("tune.algorithms = [\"ppo\", \"sac\"]"));
    let twice = TuneConfig { algorithms: vec![Algorithm::Sac, Algorithm::Sac], ..Default::default() };
    assert!(twice.validate().unwrap_err().to_string().contains("tune.algorithms names sac twice"));
    let none = TuneConfig { algorithms: vec![], ..Default::default() };
    assert!(none.validate().unwrap_err().to_string().contains("tune.algorithms must name at least one"));
    let rungs = TuneConfig { budget_steps: 100_000, min_steps: 11_112, reduction: 3, ..Default::default() }.rungs();
    assert_eq!(rungs, [11_112, 33_336, 100_000]);
    assert_eq!(TuneConfig { reduction: 1, ..Default::default() }.rungs(), [100_000]);
}

/// `tune.algorithms = ["ppo", "sac"]`: the algorithm is a choice of the space (by code: 0 ppo, 1 sac), SAC's
/// `tau` joins the default space, and a SAC trial takes the parameters both have as its own (`[sac]`),
/// a PPO trial as PPO's; a code that is no algorithm is refused with the key.
#[test]
fn the_algorithm_is_a_choice_and_a_sac_trial_takes_the_shared_parameters_as_its_own() {
    let plain = TuneConfig::default();
    assert!(!plain.space().contains_key("algorithm") && !plain.space().contains_key("tau"), "PPO alone as before");
    let both = TuneConfig { algorithms: vec![Algorithm::Ppo, Algorithm::Sac], ..Default::default() };
    assert_eq!(both.space()["algorithm"], Dist::Choice { values: vec![0.0, 1.0] });
    assert!(both.space().contains_key("tau"));
    let dir = tempfile::tempdir().unwrap();
    let mut c = small_config(dir.path());
    c.tune.algorithms = both.algorithms.clone();
    let mut p = space::random(&c.tune.space(), 3, 0);
    for (k, v) in [("algorithm", 1.0), ("learning_rate", 2e-3), ("batch_size", 32.0), ("width", 16.0)] {
        p.insert(k.into(), v);
    }
    p.extend([("depth".into(), 2.0), ("gamma".into(), 0.95), ("tau".into(), 0.02)]);
    let sac = space::apply(&c, &p, 7).unwrap();
    let s = &sac.sac;
    assert_eq!(
        (s.actor_learning_rate, s.critic_learning_rate, s.batch_size, s.gamma, s.tau),
        (2e-3, 2e-3, 32, 0.95, 0.02)
    );
    assert_eq!((s.hidden.clone(), s.seed, sac.env.seed), (vec![16, 16], 7, 7));
    assert_eq!((sac.ppo.learning_rate, sac.ppo.hidden.clone()), (c.ppo.learning_rate, c.ppo.hidden.clone()));
    p.insert("algorithm".into(), 0.0);
    let ppo = space::apply(&c, &p, 7).unwrap();
    assert_eq!((ppo.ppo.learning_rate, ppo.ppo.hidden.clone()), (2e-3, vec![16, 16]));
    assert_eq!(ppo.sac.actor_learning_rate, c.sac.actor_learning_rate);
    p.insert("algorithm".into(), 5.0);
    assert!(space::apply(&c, &p, 7).unwrap_err().to_string().contains("tune.space.algorithm: 5 is no algorithm"));
    assert_eq!((space::show("algorithm", 1.0), space::show("algorithm", 0.0)), ("sac".into(), "ppo".into()));
}

#[cfg(feature = "train")]
mod training {
    use super::super::population::Group;
    use super::super::study::split;
    use super::super::trial::Trial;
    use super::*;
    use rayon::prelude::*;
    use tch::Device;

    /// `tune.algorithms = ["ppo", "sac"]` end to end: the search draws the algorithm per trial, trials of
    /// each reach their rungs, `tune show`'s table names each trial's algorithm, and the best trial's
    /// registered model names its algorithm in its manifest; with SAC alone, the candidate is SAC's.
    #[test]
    fn a_search_over_ppo_and_sac_trains_both_and_registers_the_best_with_its_algorithm() {
        use crate::config::{SacConfig, SamplerKind};
        use crate::models::{ModelKind, Registry};
        use crate::retrain::study_record::TrialRecord;
        let dir = tempfile::tempdir().unwrap();
        let mut c = small_config(dir.path());
        (c.tune.algorithms, c.tune.sampler) = (vec![Algorithm::Ppo, Algorithm::Sac], SamplerKind::Random);
        c.sac =
            SacConfig { hidden: vec![16], buffer_size: 1_000, batch_size: 32, warmup_steps: 32, ..Default::default() };
        let job = |config: Config, trials: usize| super::super::TuneJob {
            config,
            device: crate::training::device::DeviceRequest::Cpu,
            trials: Some(trials),
            parallel: Some(2),
            budget_steps: None,
            time_budget: None,
            threads: Some(2),
            population: Some(false),
            data: None,
            json: false,
            optuna_journal: None,
            cluster: None,
            trigger: "test".into(),
        };
        let out = super::super::study::run(job(c.clone(), 6)).unwrap();
        let algorithm = |t: &TrialRecord| space::algorithm(&c.tune, &t.params).unwrap();
        for a in [Algorithm::Ppo, Algorithm::Sac] {
            let judged = out.study.trials.iter().filter(|t| algorithm(t) == a && !t.curve.is_empty()).count();
            assert!(judged >= 1, "no {a} trial reached a rung: {:?}", out.study.trials);
        }
        let table = super::super::table(&out.study);
        assert!(table.contains("algorithm=sac") && table.contains("algorithm=ppo"), "{table}");
        let models = c.state_dir.join("models");
        let (m, _) = Registry::open(&models).unwrap().load(&out.model_id).unwrap();
        assert_eq!(m.algorithm, algorithm(out.study.best_trial().unwrap()), "{table}");
        c.tune.algorithms = vec![Algorithm::Sac];
        let out = super::super::study::run(job(c.clone(), 2)).unwrap();
        assert!(out.study.trials.iter().all(|t| t.params.get("algorithm") == Some(&1.0)), "{:?}", out.study.trials);
        let (m, _) = Registry::open(&models).unwrap().load(&out.model_id).unwrap();
        assert_eq!((m.algorithm, m.kind), (Algorithm::Sac, ModelKind::Ppo));
    }

    /// Issue 34: trials train as one population by a typed key, the PPO shape and the env count: trials whose
    /// draws differ only in values each trial keeps as its own (learning rate, clip range, γ, λ, entropy, seed)
    /// share it; a drawn shape value (rollout length, minibatch, epochs, width, depth) or another env count
    /// splits them.
    #[test]
    fn trials_differing_in_tuned_values_share_a_group_and_a_shape_value_splits_them() {
        use super::super::population::GroupKey;
        let dir = tempfile::tempdir().unwrap();
        let c = small_config(dir.path());
        let base = [("learning_rate", 1e-3), ("n_steps", 16.0), ("batch_size", 16.0), ("n_epochs", 2.0)];
        let draw = |c: &Config, extra: &[(&str, f64)], seed: u64| {
            let p: space::Params = base.iter().chain(extra).map(|(k, v)| (k.to_string(), *v)).collect();
            GroupKey::of(&space::apply(c, &p, seed).unwrap())
        };
        let key = draw(&c, &[], 1);
        let tuned = [("learning_rate", 2e-3), ("clip_range", 0.3), ("gamma", 0.95), ("gae_lambda", 0.9)];
        assert_eq!(key, draw(&c, &tuned, 2), "tuned values and the seed split the population");
        assert_eq!(key, draw(&c, &[("ent_coef", 0.01)], 3), "the entropy coefficient splits the population");
        for shape in [("n_steps", 8.0), ("batch_size", 32.0), ("n_epochs", 3.0), ("width", 8.0), ("depth", 1.0)] {
            assert_ne!(key, draw(&c, &[shape], 1), "{shape:?} left the shape as it was");
        }
        let mut more_envs = c.clone();
        more_envs.env.n_envs += 1;
        assert_ne!(key, draw(&more_envs, &[], 1), "another env count joined the population");
    }

    fn weights(t: &Trial) -> Vec<(String, Vec<f32>)> {
        let mut v: Vec<(String, Vec<f32>)> = t
            .ppo()
            .unwrap()
            .vs
            .variables()
            .into_iter()
            .map(|(k, x)| (k, Vec::<f32>::try_from(x.to_kind(tch::Kind::Float).reshape([-1])).unwrap()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Issue 21: a trial trained alone and the same trial trained in a population of 8 on a pool of two
    /// threads, both to two rungs, end with the same weights bit for bit and the same validation values.
    #[test]
    fn a_trial_trains_the_same_alone_and_in_a_population_of_eight() {
        let dir = tempfile::tempdir().unwrap();
        let c = small_config(dir.path());
        let shared = split(&c, &c.tune, None, Device::Cpu, None).unwrap();
        let (space, rungs, seed) = (c.tune.space(), c.tune.rungs(), c.tune.seed);
        let new =
            |n: usize| Trial::new(&c, &shared, &rungs, seed, n, space::random(&space, seed, n), false).ok().unwrap().0;
        let mut population: Vec<Trial> = (0..8).map(new).collect();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for _ in 0..2 {
            pool.install(|| population.par_iter_mut().for_each(|t| t.advance(&shared)));
            population.iter_mut().for_each(|t| t.next_rung += 1);
        }
        let mut alone = new(5);
        for _ in 0..2 {
            alone.advance(&shared);
            alone.next_rung += 1;
        }
        let beside = &population[5];
        assert_eq!(alone.rec.curve.len(), 2, "{:?}", alone.rec);
        assert_eq!(alone.rec.curve, beside.rec.curve);
        assert_eq!(alone.learner.env_steps(), beside.learner.env_steps());
        assert_eq!(weights(&alone), weights(beside), "trial 5's weights differ when trained beside others");
        assert_ne!(weights(&population[4]), weights(beside), "two trials of the population trained alike");
    }

    /// The GPU path's populations, on the CPU: trial 5 of a population of 8 (one env launch, stacked
    /// weights) and trial 5 in a population of its own, both trained to two rungs with trial 1 leaving after
    /// the first, end with the same weights bit for bit and the same validation values. The space keeps the
    /// shape fixed (learning rate, clip range, γ, the env's stop and reward scale vary), so all 8 form one group.
    #[test]
    fn a_trial_trains_the_same_alone_and_in_a_stacked_population_of_eight() {
        tch::set_num_threads(1);
        let dir = tempfile::tempdir().unwrap();
        let mut c = small_config(dir.path());
        // 4 envs x 16 steps: the rungs at 64 and 192 steps are updates 1 and 3.
        (c.ppo.n_steps, c.ppo.batch_size) = (16, 32);
        c.tune.space = BTreeMap::from([
            ("learning_rate".to_string(), Dist::Log { low: 1e-4, high: 3e-3 }),
            ("clip_range".to_string(), Dist::Linear { low: 0.1, high: 0.3 }),
            ("gamma".to_string(), Dist::Linear { low: 0.9, high: 0.99 }),
            ("trailing_stop".to_string(), Dist::Linear { low: 0.0, high: 0.1 }),
            ("reward_scale".to_string(), Dist::Log { low: 0.5, high: 2.0 }),
        ]);
        let shared = split(&c, &c.tune, None, Device::Cpu, None).unwrap();
        let (space, rungs, seed) = (c.tune.space(), c.tune.rungs(), c.tune.seed);
        let new = |n: usize| {
            let (t, env) = Trial::new(&c, &shared, &rungs, seed, n, space::random(&space, seed, n), true).ok().unwrap();
            (t, env.expect("the env kernel runs on CPU tensors"))
        };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let train = |numbers: &[usize]| {
            let (mut groups, refused) = Group::form(numbers.iter().map(|&n| new(n)).collect());
            assert!(refused.is_empty() && groups.len() == 1, "{} groups", groups.len());
            let mut g = groups.remove(0);
            g.advance(&shared, &pool);
            for t in &mut g.members {
                assert!(matches!(t.outcome, Some(Ok(_))), "trial {}: {:?}", t.rec.number, t.outcome);
                t.next_rung += 1;
            }
            // Trial 1 leaves (as a pruned trial would).
            if let Some(at) = g.members.iter().position(|t| t.rec.number == 1) {
                g.members.remove(at);
                let keep: Vec<usize> = (0..numbers.len()).filter(|&k| k != at).collect();
                assert!(g.keep(&keep).unwrap());
            }
            g.advance(&shared, &pool);
            g.members
        };
        let together = train(&(0..8).collect::<Vec<_>>());
        let alone = train(&[5]);
        let beside = together.iter().find(|t| t.rec.number == 5).unwrap();
        assert_eq!(alone[0].rec.curve.len(), 2, "{:?}", alone[0].rec);
        assert_eq!(alone[0].rec.curve, beside.rec.curve);
        assert_eq!(alone[0].learner.env_steps(), beside.learner.env_steps());
        let differ: Vec<String> = weights(&alone[0])
            .iter()
            .zip(weights(beside))
            .filter(|((_, a), (_, b))| a != b)
            .map(|((name, a), (_, b))| {
                let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
                format!("{name} (by up to {diff:e})")
            })
            .collect();
        assert!(differ.is_empty(), "trial 5's variables differ in a population of 8: {}", differ.join(", "));
        let other = together.iter().find(|t| t.rec.number == 4).unwrap();
        assert_ne!(weights(other), weights(beside), "two trials of the population trained alike");
        assert_eq!(together.len(), 7);
    }

    /// The same in a population: rungs at 64, 96 and 128 steps are updates 1, 2 and 2; the third wave judges
    /// nothing anew.
    #[test]
    fn in_a_population_rungs_that_round_to_the_same_update_are_judged_once() {
        let dir = tempfile::tempdir().unwrap();
        let c = small_config(dir.path());
        let shared = split(&c, &c.tune, None, Device::Cpu, None).unwrap();
        let mut params = space::random(&c.tune.space(), 1, 0);
        params.insert("n_steps".into(), 16.0);
        let (t, env) = Trial::new(&c, &shared, &[64, 96, 128], 1, 0, params, true).ok().unwrap();
        let (mut groups, _) = Group::form(vec![(t, env.unwrap())]);
        let mut g = groups.remove(0);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let mut values = Vec::new();
        for _ in 0..3 {
            g.advance(&shared, &pool);
            let t = &mut g.members[0];
            values.push(t.outcome.clone().unwrap().unwrap());
            t.next_rung += 1;
        }
        let t = &g.members[0];
        let steps: Vec<u64> = t.rec.curve.iter().map(|r| r.steps).collect();
        assert_eq!(steps, [64, 128]);
        assert_eq!(values[2], values[1]);
        assert_eq!(t.ppo().unwrap().updates, 2);
    }

    /// Two rungs that round up to the same update count are judged once: one backtest, one curve point,
    /// the same value reported at both.
    #[test]
    fn rungs_that_round_to_the_same_update_are_judged_once() {
        let dir = tempfile::tempdir().unwrap();
        let c = small_config(dir.path());
        let shared = split(&c, &c.tune, None, Device::Cpu, None).unwrap();
        let mut params = space::random(&c.tune.space(), 1, 0);
        params.insert("n_steps".into(), 16.0);
        // 4 envs x 16 steps = 64 steps per update: the rungs are updates 1, 2 and 2.
        let mut t = Trial::new(&c, &shared, &[64, 96, 128], 1, 0, params, false).ok().unwrap().0;
        let mut values = Vec::new();
        for _ in 0..3 {
            t.advance(&shared);
            values.push(t.outcome.clone().unwrap().unwrap());
            t.next_rung += 1;
        }
        let steps: Vec<u64> = t.rec.curve.iter().map(|r| r.steps).collect();
        assert_eq!(steps, [64, 128]);
        assert_eq!(values[2], values[1]);
        assert_eq!(t.ppo().unwrap().updates, 2);
    }
}

/// `tune --budget-steps 49152` whose trial trains 2 updates of 32,768 steps says the 65,536 steps it
/// trained and why (issue 36): not a bare "complete at 65536 steps".
#[test]
fn a_trial_that_trains_past_its_rung_says_the_rounding() {
    use crate::retrain::study_record::{RungValue, StudyRecord, TrialRecord, TrialState};
    let now = chrono::Utc::now();
    let trial = TrialRecord {
        number: 0,
        state: TrialState::Complete,
        params: Default::default(),
        seed: 1,
        curve: vec![RungValue { steps: 65_536, value: 0.8125 }],
        metrics: BTreeMap::new(),
        started_at: now,
        ended_at: Some(now),
        error: None,
    };
    let study = StudyRecord {
        name: "tune-x".into(),
        trigger: "command line".into(),
        sampler: "tpe".into(),
        seed: 0,
        metric: "sharpe".into(),
        space: BTreeMap::new(),
        rungs: vec![49_152],
        reduction: 3,
        parallel: 1,
        trials_planned: 1,
        validation_from: None,
        validation_to: None,
        started_at: now,
        ended_at: None,
        trials: vec![trial.clone()],
        best: None,
        model_id: None,
        error: None,
    };
    assert_eq!(
        super::study::end_line(&study, &trial, Some((49_152, 64, 512))),
        "trial 0 complete at 65,536 steps (the 49,152-step rung rounds up to 2 whole updates of 32,768: 64 envs × 512 steps): sharpe 0.812"
    );
    // A rung trained exactly needs no word.
    let exact = TrialRecord { curve: vec![RungValue { steps: 49_152, value: 0.5 }], ..trial };
    assert_eq!(
        super::study::end_line(&study, &exact, Some((49_152, 64, 768))),
        "trial 0 complete at 49,152 steps: sharpe 0.500"
    );
}
