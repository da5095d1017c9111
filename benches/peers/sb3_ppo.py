#!/usr/bin/env python3
"""Stable-Baselines3 2.9.2 PPO on FinRL 0.3.7's numpy StockTradingEnv: the speed peer of `tradebot bench ppo`.

The env is FinRL's own file, fetched as benches/peers/finrl_env.py does (never committed), over the same
seeded synthetic panel (finrl_env.panel). The work matches `tradebot bench ppo`'s defaults: one env,
30 assets, 2,520 days, an MLP of [64, 64] tanh for the actor and for the critic, n_steps 2048,
batch 64, 10 epochs, 4,096 timesteps, on the CPU with one torch thread. Needs stable-baselines3==2.9.2
and gymnasium in the running Python (`make bench-ppo` installs them into the venv; `tradebot bench gpu`
installs them from a carried wheelhouse).

On a GPU (`tradebot bench gpu`) it runs the setup of the report this project grew from: `--envs 32
--subproc` (a `SubprocVecEnv` of 32 worker processes, each stepping FinRL's numpy env on the CPU),
`--hidden 2048,1024,512`, `--device cuda`.

  sb3_ppo.py [--steps N] [--hidden 64,64] [--n-steps 2048] [--batch-size 64] [--epochs 10]
             [--threads 1] [--envs 1] [--subproc] [--device cpu|cuda]
             [--against JSON]   ... and the ratio to tradebot's `bench ppo --json` line

The figure (`env_steps_per_s`) is `learn()`'s alone; on CUDA after one untimed update, as ours is. What comes before and after it (imports, building the
envs and their worker processes, the model on its device, closing the workers) is reported beside it as
`setup_seconds` and `close_seconds`, and each phase is said on stderr as it ends, so that a run stopped by a
time limit still shows where it spent its time.
"""
import argparse, json, pathlib, sys, tempfile, time

STARTED = time.perf_counter()


def phase(what: str) -> float:
    """Says on stderr that `what` ended, with the seconds since the script started; returns them."""
    at = time.perf_counter() - STARTED
    print(f"sb3_ppo: {what} after {at:.1f} s", file=sys.stderr, flush=True)
    return at

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from finrl_env import load_finrl_env, panel  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", type=int, default=30)
    ap.add_argument("--days", type=int, default=2520)
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--steps", type=int, default=4096)
    ap.add_argument("--hidden", default="64,64")
    ap.add_argument("--n-steps", type=int, default=2048)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--envs", type=int, default=1)
    ap.add_argument("--subproc", action="store_true", help="step the envs in worker processes")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--against", help="tradebot's `bench ppo --json` line: print the ratio")
    args = ap.parse_args()

    import torch
    import stable_baselines3
    from stable_baselines3 import PPO
    phase("imported torch and stable-baselines3")

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        Env = load_finrl_env(pathlib.Path(tmp))
    prices, tech, turb, _ = panel(args.days, args.assets, args.seed)
    make = lambda: Env(config=dict(price_array=prices, tech_array=tech, turbulence_array=turb, if_train=True))
    if args.envs == 1 and not args.subproc:
        env = make()
    else:
        from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
        env = (SubprocVecEnv if args.subproc else DummyVecEnv)([make] * args.envs)
    phase(f"built {args.envs} env(s){' in worker processes' if args.subproc else ''}")
    hidden = [int(h) for h in args.hidden.split(",")]
    model = PPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.epochs,
                policy_kwargs=dict(net_arch=dict(pi=hidden, vf=hidden), activation_fn=torch.nn.Tanh),
                device=args.device, seed=args.seed, verbose=0)
    setup = phase(f"built the model on {args.device}")
    cuda = args.device.startswith("cuda")
    warm = 0
    if cuda:
        # As `tradebot bench ppo` does on CUDA: one update untimed (cuBLAS's handles, the allocator's first
        # blocks), then the timed steps continue from it.
        model.learn(total_timesteps=args.envs * args.n_steps)
        torch.cuda.synchronize()
        warm = model.num_timesteps
        phase(f"warmed up with one update ({warm} steps)")
    t0 = time.perf_counter()
    model.learn(total_timesteps=args.steps, reset_num_timesteps=not cuda)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    done = model.num_timesteps - warm
    phase(f"learned {done} steps in {seconds:.1f} s")
    t1 = time.perf_counter()
    if hasattr(env, "close"):
        env.close()
    closed = time.perf_counter() - t1
    phase("closed the env(s)")
    print("sb3:      " if args.against else "", end="")
    print(json.dumps({"peer": f"sb3-{stable_baselines3.__version__}-ppo-on-finrl-0.3.7-numpy", "threads": args.threads,
                      "device": args.device, "subproc": args.subproc, "envs": args.envs, "assets": args.assets, "obs_dim": int(env.observation_space.shape[0]),
                      "hidden": hidden, "n_steps": args.n_steps, "batch_size": args.batch_size,
                      "epochs": args.epochs, "env_steps": done, "seconds": seconds,
                      "setup_seconds": setup, "close_seconds": closed, "warmup_steps": warm,
                      "env_steps_per_s": done / seconds}))
    if args.against:
        ours = json.loads(args.against)
        ratio = ours["env_steps_per_s"] / (done / seconds)
        print(f"ratio: tradebot PPO is {ratio:.1f}x Stable-Baselines3's env-steps/s on the same work")


if __name__ == "__main__":
    main()
