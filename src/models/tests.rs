use super::*;
use crate::domain::{Symbol, Timeframe};

fn draft(kind: ModelKind) -> Manifest {
    Manifest {
        state: ModelState::Champion,
        ..Manifest::draft(
            kind,
            FeatureRef { version: 1, names: vec!["ret_1".into(), "rsi_14".into()] },
            vec![TensorSpec { name: "obs".into(), shape: vec![-1, 7] }],
            vec![TensorSpec { name: "action".into(), shape: vec![-1, 3] }],
            vec![Symbol::new("AAPL").unwrap()],
            Timeframe::DAY1,
        )
    }
}

#[test]
fn add_is_content_addressed_and_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let a = r.add(b"onnx-bytes-a", draft(ModelKind::Ppo)).unwrap();
    assert!(a.id.starts_with("ppo-") && a.id.len() == 4 + 16, "{}", a.id);
    assert_eq!(a.state, ModelState::Candidate, "a new model is never champion by itself");
    assert_eq!(r.add(b"onnx-bytes-a", draft(ModelKind::Ppo)).unwrap().id, a.id);
    assert_ne!(r.add(b"onnx-bytes-b", draft(ModelKind::Ppo)).unwrap().id, a.id);
    assert_eq!(r.list().unwrap().0.len(), 2);
    assert_eq!(r.load(&a.id).unwrap().1, b"onnx-bytes-a");
}

#[test]
fn corrupt_model_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let a = r.add(b"good bytes", draft(ModelKind::Lstm)).unwrap();
    std::fs::write(dir.path().join(&a.id).join(registry::ONNX_FILE), b"good byt").unwrap();
    let e = r.load(&a.id).unwrap_err();
    assert!(matches!(e, RegistryError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(&a.id));
    assert!(r.promote(&a.id, "test").is_err(), "a corrupt model cannot be promoted");
    std::fs::write(dir.path().join(&a.id).join(registry::MANIFEST_FILE), b"{").unwrap();
    let (ok, bad) = r.list().unwrap();
    assert!(ok.is_empty() && bad.len() == 1, "the bad manifest is reported, not dropped");
    assert!(matches!(r.get("ppo-nope"), Err(RegistryError::NotFound { .. })));
}

#[test]
fn promote_retires_the_old_champion_and_rollback_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let a = r.add(b"a", draft(ModelKind::Ppo)).unwrap();
    let b = r.add(b"b", draft(ModelKind::Ppo)).unwrap();
    let l = r.add(b"l", draft(ModelKind::Lstm)).unwrap();
    assert!(matches!(r.rollback(ModelKind::Ppo, "x"), Err(RegistryError::NoRollback { .. })));
    r.promote(&a.id, "first").unwrap();
    r.promote(&l.id, "lstm").unwrap();
    r.promote(&b.id, "better sharpe").unwrap();
    assert_eq!(r.champion(ModelKind::Ppo).unwrap().unwrap().id, b.id);
    assert_eq!(r.get(&a.id).unwrap().state, ModelState::Retired);
    assert_eq!(r.champion(ModelKind::Lstm).unwrap().unwrap().id, l.id, "kinds are independent");
    let back = r.rollback(ModelKind::Ppo, "live drawdown").unwrap();
    assert_eq!(back.id, a.id);
    assert_eq!(r.get(&b.id).unwrap().state, ModelState::Retired);
    let h = r.history().unwrap();
    assert_eq!(h.last().unwrap().action, "rollback");
    assert_eq!(h.last().unwrap().demoted.as_deref(), Some(b.id.as_str()));
}

#[test]
fn manifest_mismatch_is_refused() {
    let m = Manifest { id: "ppo-x".into(), ..draft(ModelKind::Ppo) };
    let f = m.features.clone();
    let sym = m.symbols.clone();
    let obs = |n| vec![TensorSpec { name: "obs".into(), shape: vec![-1, n] }];
    let tf = m.timeframe;
    assert!(m.check_inputs(&f, &obs(7), &sym, tf).is_ok());
    assert!(matches!(m.check_inputs(&f, &obs(8), &sym, tf), Err(MismatchError::Shape { .. })));
    let v2 = FeatureRef { version: 2, ..f.clone() };
    assert!(matches!(m.check_inputs(&v2, &obs(7), &sym, tf), Err(MismatchError::FeatureVersion { .. })));
    let renamed = FeatureRef { names: vec!["ret_1".into(), "rsi_7".into()], ..f.clone() };
    assert!(matches!(m.check_inputs(&renamed, &obs(7), &sym, tf), Err(MismatchError::FeatureNames { .. })));
    let other = vec![Symbol::new("MSFT").unwrap()];
    let e = m.check_inputs(&f, &obs(7), &other, tf).unwrap_err();
    assert!(matches!(e, MismatchError::Symbols { .. }));
    assert!(e.to_string().contains("trades AAPL, the config trades"), "symbols as people write them: {e}");
    let missing = vec![TensorSpec { name: "x".into(), shape: vec![-1, 7] }];
    assert!(matches!(m.check_inputs(&f, &missing, &sym, tf), Err(MismatchError::MissingInput { .. })));
    // A daily model fed 15-minute bars would trade every 15 minutes: refused, naming both and the fix.
    let e = m.check_inputs(&f, &obs(7), &sym, Timeframe::Minutes(15)).unwrap_err();
    assert!(matches!(e, MismatchError::Timeframe { model: Timeframe::DAY1, config: Timeframe::Minutes(15), .. }));
    let msg = e.to_string();
    assert!(msg.contains("1Day") && msg.contains("15Min") && msg.contains("market.timeframe"), "{msg}");
}

#[test]
fn seed_from_imports_missing_models_and_crowns_one_per_kind() {
    let shipped_dir = tempfile::tempdir().unwrap();
    let shipped = Registry::open(shipped_dir.path()).unwrap();
    let p1 = shipped.add(b"ppo-one", draft(ModelKind::Ppo)).unwrap();
    let p2 = shipped.add(b"ppo-two", draft(ModelKind::Ppo)).unwrap();
    let l1 = shipped.add(b"lstm-one", draft(ModelKind::Lstm)).unwrap();
    shipped.promote(&p1.id, "the shipped default").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let rep = r.seed_from(shipped_dir.path()).unwrap();
    assert_eq!(rep.imported.len(), 3, "{rep:?}");
    assert!(rep.refused.is_empty(), "{rep:?}");
    assert_eq!(r.champion(ModelKind::Ppo).unwrap().unwrap().id, p1.id, "the shipped champion wins");
    assert_eq!(r.champion(ModelKind::Lstm).unwrap().unwrap().id, l1.id, "the only lstm");
    assert_eq!(r.get(&p2.id).unwrap().state, ModelState::Candidate);
    assert_eq!(r.load(&p2.id).unwrap().1, b"ppo-two", "bytes copied and verified");
    // Seeding again changes nothing; a champion of the registry's own is never replaced.
    let own = r.add(b"own-ppo", draft(ModelKind::Ppo)).unwrap();
    r.promote(&own.id, "trained here").unwrap();
    let again = r.seed_from(shipped_dir.path()).unwrap();
    assert!(again.imported.is_empty() && again.champions.is_empty(), "{again:?}");
    assert_eq!(r.champion(ModelKind::Ppo).unwrap().unwrap().id, own.id);
    assert!(r.seed_from(&dir.path().join("no-such-dir")).unwrap().imported.is_empty());
}

#[test]
fn seed_from_refuses_a_shipped_model_whose_file_does_not_match() {
    let shipped_dir = tempfile::tempdir().unwrap();
    let shipped = Registry::open(shipped_dir.path()).unwrap();
    let bad = shipped.add(b"tampered", draft(ModelKind::Ppo)).unwrap();
    let good = shipped.add(b"fine", draft(ModelKind::Lstm)).unwrap();
    std::fs::write(shipped_dir.path().join(&bad.id).join(registry::ONNX_FILE), b"tampered!").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let rep = r.seed_from(shipped_dir.path()).unwrap();
    assert_eq!(rep.imported, vec![good.id]);
    assert_eq!(rep.refused.len(), 1);
    assert!(rep.refused[0].to_string().contains(&bad.id), "{}", rep.refused[0]);
    assert!(matches!(r.get(&bad.id), Err(RegistryError::NotFound { .. })));
    assert!(r.champion(ModelKind::Ppo).unwrap().is_none(), "no ppo champion from a refused model");
}

#[test]
fn the_shipped_ppo_model_seeds_a_champion_that_fits_the_default_pipeline() {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let rep = r.seed_from(&shipped).unwrap();
    assert!(rep.refused.is_empty(), "{:?}", rep.refused);
    let m = r.champion(ModelKind::Ppo).unwrap().expect("a shipped ppo champion");
    let spec = crate::features::FeatureSpec::default();
    let syms: Vec<Symbol> = ["AAPL", "MSFT", "IBM"].iter().map(|s| Symbol::new(s).unwrap()).collect();
    let obs_dim = 1 + 3 * (1 + spec.n_cols() as i64);
    let pipeline = FeatureRef { version: crate::features::FEATURE_VERSION, names: spec.names() };
    let obs = [TensorSpec { name: "obs".into(), shape: vec![-1, obs_dim] }];
    m.check_inputs(&pipeline, &obs, &syms, Timeframe::DAY1).unwrap();
    assert!(r.load(&m.id).is_ok(), "hash verified after the import");
}

/// Sets a model's state on disk behind the registry's back (what a crash mid-promotion leaves).
fn force_state(root: &std::path::Path, id: &str, state: &str) {
    let path = root.join(id).join("manifest.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    v["state"] = serde_json::Value::String(state.into());
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn a_crash_mid_promotion_leaves_a_champion_and_history_blocks_auto_seeding() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let a = r.add(b"a", draft(ModelKind::Ppo)).unwrap();
    let b = r.add(b"b", draft(ModelKind::Ppo)).unwrap();
    r.promote(&a.id, "first").unwrap();
    // B crowned, then the process died before A was retired and the history written.
    force_state(dir.path(), &b.id, "champion");
    assert_eq!(r.champion(ModelKind::Ppo).unwrap().unwrap().id, a.id, "the history's champion");
    let c = r.add(b"c", draft(ModelKind::Ppo)).unwrap();
    r.promote(&c.id, "next").unwrap();
    assert_eq!(r.champion(ModelKind::Ppo).unwrap().unwrap().id, c.id);
    for id in [&a.id, &b.id] {
        assert_eq!(r.get(id).unwrap().state, ModelState::Retired, "{id}");
    }
    // No champion left (retired by hand): the shipped default is not seeded over the history.
    force_state(dir.path(), &c.id, "retired");
    let shipped_dir = tempfile::tempdir().unwrap();
    let shipped = Registry::open(shipped_dir.path()).unwrap();
    let s = shipped.add(b"shipped", draft(ModelKind::Ppo)).unwrap();
    shipped.promote(&s.id, "default").unwrap();
    let rep = r.seed_from(shipped_dir.path()).unwrap();
    assert_eq!(rep.imported, vec![s.id.clone()]);
    assert!(rep.champions.is_empty(), "{rep:?}");
    assert!(r.champion(ModelKind::Ppo).unwrap().is_none());
}

#[test]
fn seeding_by_fit_crowns_only_models_that_fit_and_says_why_the_others_do_not() {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let rep = r
        .seed_fitting(&shipped, &|m| if m.kind == ModelKind::Ppo { Err("trained on 1Day bars".into()) } else { Ok(()) })
        .unwrap();
    assert!(r.champion(ModelKind::Ppo).unwrap().is_none(), "a misfit is not crowned");
    assert!(rep.not_applicable.iter().any(|(id, why)| id.starts_with("ppo-") && why == "trained on 1Day bars"));
    assert!(rep.imported.iter().any(|id| id.starts_with("ppo-")), "imported all the same");
    assert!(rep.champions.iter().all(|id| !id.starts_with("ppo-")));
}

#[test]
fn rollbacks_walk_back_through_the_champions_and_never_flip_back() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let [a, b, c] = [b"a", b"b", b"c"].map(|x| r.add(x, draft(ModelKind::Ppo)).unwrap().id);
    for id in [&a, &b, &c] {
        r.promote(id, "better").unwrap();
    }
    assert_eq!(r.rollback(ModelKind::Ppo, "first").unwrap().id, b, "back to the one C replaced");
    assert_eq!(r.rollback(ModelKind::Ppo, "second").unwrap().id, a, "further back, not to C again");
    assert!(
        matches!(r.rollback(ModelKind::Ppo, "third"), Err(RegistryError::NoRollback { .. })),
        "A was the first champion: nothing earlier"
    );
    assert_eq!(r.champion(ModelKind::Ppo).unwrap().unwrap().id, a);
    // A promotion after rollbacks starts a new line from the champion it replaced.
    r.promote(&c, "again").unwrap();
    assert_eq!(r.rollback(ModelKind::Ppo, "fourth").unwrap().id, a);
}

#[test]
fn latest_is_the_model_trained_last_whatever_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    assert!(r.latest(None).unwrap().is_none());
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&chrono::Utc);
    let mut old = draft(ModelKind::Ppo);
    old.created_at = at("2024-01-01T00:00:00Z");
    let mut new = draft(ModelKind::Ppo);
    new.created_at = at("2024-02-01T00:00:00Z");
    let mut lstm = draft(ModelKind::Lstm);
    lstm.created_at = at("2024-03-01T00:00:00Z");
    let old = r.add(b"old", old).unwrap();
    let new = r.add(b"new", new).unwrap();
    let lstm = r.add(b"lstm", lstm).unwrap();
    r.promote(&old.id, "champion").unwrap();
    assert_eq!(r.latest(Some(ModelKind::Ppo)).unwrap().unwrap().id, new.id, "a candidate, trained last");
    assert_eq!(r.latest(None).unwrap().unwrap().id, lstm.id);
    // The registry's read-only view lists the same, and creates nothing where there is no registry.
    assert_eq!(Registry::open_read_only(dir.path()).latest(None).unwrap().unwrap().id, lstm.id);
    let none = dir.path().join("no-such-registry");
    assert!(Registry::open_read_only(&none).list().unwrap().0.is_empty());
    assert!(!none.exists(), "reading created the directory");
}

#[test]
fn a_policys_training_state_is_kept_beside_it_checked_and_seeded_with_it() {
    let shipped_dir = tempfile::tempdir().unwrap();
    let shipped = Registry::open(shipped_dir.path()).unwrap();
    let state = b"safetensors of the trainer".to_vec();
    let with = shipped.add_with_state(b"policy", draft(ModelKind::Ppo), Some(&state)).unwrap();
    let sref = StateRef::in_manifest(&with).unwrap().unwrap();
    assert_eq!((sref.file.as_str(), sref.sha256.clone()), (STATE_FILE, registry::sha256_hex(&state)));
    assert_eq!(with.id, shipped.add(b"policy", draft(ModelKind::Ppo)).unwrap().id, "the id is the ONNX file's");
    let (_, path) = shipped.training_state(&with.id).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), state);
    // A model registered without a state gets one when the same ONNX is registered again with it.
    let bare = shipped.add(b"bare policy", draft(ModelKind::Ppo)).unwrap();
    assert!(matches!(shipped.training_state(&bare.id), Err(StateError::Absent { .. })));
    shipped.add_with_state(b"bare policy", draft(ModelKind::Ppo), Some(b"later")).unwrap();
    assert_eq!(std::fs::read(shipped.training_state(&bare.id).unwrap().1).unwrap(), b"later");
    // A corrupt shipped state: the model is imported without it.
    let torn = shipped.add_with_state(b"torn policy", draft(ModelKind::Ppo), Some(b"whole")).unwrap();
    std::fs::write(shipped_dir.path().join(&torn.id).join(STATE_FILE), b"torn").unwrap();
    let e = shipped.training_state(&torn.id).unwrap_err();
    assert!(matches!(e, StateError::Corrupt { .. }) && e.to_string().contains(&torn.id), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let r = Registry::open(dir.path()).unwrap();
    let rep = r.seed_from(shipped_dir.path()).unwrap();
    assert_eq!(rep.imported.len(), 3, "{rep:?}");
    assert_eq!(std::fs::read(r.training_state(&with.id).unwrap().1).unwrap(), state, "seeded with its state");
    assert!(matches!(r.training_state(&torn.id), Err(StateError::Absent { .. })), "imported without the torn one");
    std::fs::remove_file(dir.path().join(&with.id).join(STATE_FILE)).unwrap();
    let e = r.training_state(&with.id).unwrap_err();
    assert!(matches!(e, StateError::Missing { .. }) && e.to_string().contains("is missing"), "{e}");
}
