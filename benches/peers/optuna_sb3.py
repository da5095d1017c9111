#!/usr/bin/env python3
"""Optuna driving Stable-Baselines3 2.9.2 PPO on FinRL 0.3.7's numpy env: the peer of `tradebot bench tune`.

The same search as tradebot's: the trials' parameters are read from tradebot's `bench tune --json` line and
enqueued in that order (learning rate, epochs, clip range, entropy coefficient, gamma, GAE lambda), each
trial trains the same network ([64, 64] tanh by default) for the same steps (n_steps, batch size) on the
same seeded synthetic panel (finrl_env.panel), and reports its training episodes' mean return. Optuna's
recommended way to use several cores: one worker process per core on a shared journal storage, each with
one torch thread. The time is from the first worker's start (after its imports) to the last one's end.
Needs optuna, stable-baselines3==2.9.2 and gymnasium (`make bench-tune` installs them into the venv).

  optuna_sb3.py --against JSON     (tradebot's `bench tune --json` line) prints JSON and the ratio
"""
import argparse, json, multiprocessing as mp, pathlib, sys, tempfile, time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from finrl_env import load_finrl_env, panel  # noqa: E402


def worker(args):
    journal, study_name, env_dir, n_trials, ours = args
    import optuna
    import torch
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from stable_baselines3 import PPO

    sys.path.insert(0, env_dir)
    import env_stocktrading_np as finrl  # noqa: E402

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    prices, tech, turb, _ = panel(ours["days"], ours["assets"], ours["seed"])
    hidden = ours["hidden"]

    def objective(trial):
        p = dict(
            learning_rate=trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True),
            n_epochs=trial.suggest_int("n_epochs", 3, 10),
            clip_range=trial.suggest_float("clip_range", 0.1, 0.3),
            ent_coef=trial.suggest_float("ent_coef", 1e-6, 1e-2, log=True),
            gamma=trial.suggest_float("gamma", 0.95, 0.999),
            gae_lambda=trial.suggest_float("gae_lambda", 0.8, 0.99),
        )
        env = finrl.StockTradingEnv(config=dict(price_array=prices, tech_array=tech, turbulence_array=turb,
                                                if_train=True))
        model = PPO("MlpPolicy", env, n_steps=ours["n_steps"], batch_size=ours["batch_size"],
                    policy_kwargs=dict(net_arch=dict(pi=hidden, vf=hidden), activation_fn=torch.nn.Tanh),
                    device="cpu", seed=trial.number, verbose=0, **p)
        model.learn(total_timesteps=ours["steps_per_trial"])
        returns = [e["r"] for e in model.ep_info_buffer]
        return sum(returns) / len(returns) if returns else 0.0

    study = optuna.load_study(study_name=study_name, storage=JournalStorage(JournalFileBackend(journal)))
    t0 = time.time()
    study.optimize(objective, n_trials=n_trials)
    return t0, time.time()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", required=True, help="tradebot's `bench tune --json` line")
    args = ap.parse_args()
    ours = json.loads(args.against)

    import optuna
    import stable_baselines3
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        load_finrl_env(tmp)  # leaves env_stocktrading_np.py in tmp for the workers
        journal = str(tmp / "study.journal")
        study = optuna.create_study(study_name="bench", direction="maximize",
                                    storage=JournalStorage(JournalFileBackend(journal)))
        for p in ours["params"]:
            study.enqueue_trial({k: (int(v) if k == "n_epochs" else v) for k, v in p.items()})
        n, workers = ours["trials"], ours["parallel"]
        shares = [n // workers + (1 if i < n % workers else 0) for i in range(workers)]
        with mp.get_context("spawn").Pool(workers) as pool:
            spans = pool.map(worker, [(journal, "bench", str(tmp), k, ours) for k in shares if k > 0])
        trials = optuna.load_study(study_name="bench", storage=JournalStorage(JournalFileBackend(journal))).trials
    seconds = max(e for _, e in spans) - min(s for s, _ in spans)
    per_hour = len(trials) / seconds * 3600.0
    print("peer:     " + json.dumps({
        "peer": f"optuna-{optuna.__version__}+sb3-{stable_baselines3.__version__}-ppo-on-finrl-0.3.7-numpy",
        "trials": len(trials), "workers": workers, "steps_per_trial": ours["steps_per_trial"],
        "hidden": ours["hidden"], "seconds": seconds, "trials_per_hour": per_hour}))
    ratio = ours["trials_per_hour"] / per_hour
    print(f"ratio: tradebot's search runs {ratio:.1f}x the trials per hour of Optuna + Stable-Baselines3 on the "
          f"same trials ({len(trials)} trials of {ours['steps_per_trial']} steps, {workers} at a time)")


if __name__ == "__main__":
    main()
