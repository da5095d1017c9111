#!/usr/bin/env python3
"""FinRL 0.3.7's numpy StockTradingEnv as a reference and a speed peer for tradebot's environment.

FinRL's code is never committed: `pip download --no-deps finrl==0.3.7` fetches the wheel into a temporary
directory (or, where $TRADEBOT_WHEELHOUSE names a directory holding it, as on a GPU machine with no
package index, it is taken from there) and the single env file
(finrl/meta/env_stock_trading/env_stocktrading_np.py) is taken out of it at run time. It needs numpy and
gymnasium in the running Python.

The panel is synthetic and seeded (documented here, reproduced by the fixture, not by Rust): prices are a
geometric random walk per asset rounded to cents, float32; the tech array holds each asset's one-day log
return (float32); turbulence is |N(0, 40)| with about 3% of days pushed above FinRL's threshold of 99, so
the sell-everything rule runs too; actions are uniform in [-1, 1], float32.

  finrl_env.py fixture OUT.bin.gz   write the parity fixture (inputs and FinRL's holdings and total asset);
                                    tests/fixtures/finrl_np_parity.bin.gz is this, byte for byte
  finrl_env.py time [--repeat N]    time FinRL's env on the same panel and actions; prints JSON
                 [--against JSON]  ... and the ratio to tradebot's `bench env --json` line

Fixture layout (gzip, little-endian): b"FRL1", u32 days, u32 assets, u32 tech columns, then
prices f32[days x assets], tech f32[days x tech], turbulence f64[days], actions f32[(days-1) x assets],
FinRL's holdings after each step f32[(days-1) x assets], total asset f64[days] (before the first step,
then after each), and u8[days-1]: 1 where FinRL's cash was a float32 after the step.
"""
import argparse, gzip, importlib.util, json, os, pathlib, struct, subprocess, sys, tempfile, time, zipfile

import numpy as np

ENV_PATH = "finrl/meta/env_stock_trading/env_stocktrading_np.py"
MAGIC = b"FRL1"


def load_finrl_env(tmp: pathlib.Path):
    house = os.environ.get("TRADEBOT_WHEELHOUSE")
    carried = sorted(pathlib.Path(house).glob("[Ff]in[Rr][Ll]-0.3.7-*.whl")) if house else []
    if carried:
        wheel = carried[0]
    else:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "finrl==0.3.7", "-d",
                        str(tmp)], check=True)
        wheel = next(tmp.glob("*.whl"))
    with zipfile.ZipFile(wheel) as z:
        src = z.read(ENV_PATH)
    path = tmp / "env_stocktrading_np.py"
    path.write_bytes(src)
    spec = importlib.util.spec_from_file_location("finrl_env_np", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.StockTradingEnv


def panel(days: int, assets: int, seed: int):
    rng = np.random.default_rng(seed)
    p0 = rng.uniform(10.0, 200.0, size=assets)
    steps = rng.normal(0.0003, 0.02, size=(days, assets))
    steps[0] = 0.0
    prices = np.round(p0 * np.exp(np.cumsum(steps, axis=0)), 2).astype(np.float32)
    prices = np.maximum(prices, np.float32(0.01))
    tech = np.zeros_like(prices)
    tech[1:] = np.log(prices[1:] / prices[:-1])
    turb = np.abs(rng.normal(0.0, 40.0, size=days))
    spikes = rng.random(days) < 0.03
    turb[spikes] = 100.0 + rng.uniform(0.0, 200.0, size=spikes.sum())
    turb[0] = 0.0
    actions = rng.uniform(-1.0, 1.0, size=(days - 1, assets)).astype(np.float32)
    return prices, tech.astype(np.float32), turb.astype(np.float64), actions


def rollout(Env, prices, tech, turb, actions):
    env = Env(config=dict(price_array=prices, tech_array=tech, turbulence_array=turb, if_train=False))
    env.reset()
    holdings = np.zeros((len(actions), prices.shape[1]), dtype=np.float32)
    total = np.zeros(len(actions) + 1, dtype=np.float64)
    amount_f32 = np.zeros(len(actions), dtype=np.uint8)
    total[0] = float(env.total_asset)
    for i, a in enumerate(actions):
        env.step(a)
        holdings[i] = env.stocks
        total[i + 1] = float(env.total_asset)
        amount_f32[i] = 1 if isinstance(env.amount, np.float32) else 0
    return holdings, total, amount_f32


def write_fixture(out, prices, tech, turb, actions, holdings, total, amount_f32):
    days, assets = prices.shape
    body = bytearray(MAGIC)
    body += struct.pack("<III", days, assets, tech.shape[1])
    for arr, dt in [(prices, "<f4"), (tech, "<f4"), (turb, "<f8"), (actions, "<f4"), (holdings, "<f4"),
                    (total, "<f8"), (amount_f32, "u1")]:
        body += np.ascontiguousarray(arr, dtype=dt).tobytes()
    with open(out, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(bytes(body))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["fixture", "time"])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--days", type=int, default=2520)
    ap.add_argument("--assets", type=int, default=30)
    ap.add_argument("--seed", type=int, default=20260101)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", help="tradebot's `bench env --json` line on the same work: print the ratio")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Env = load_finrl_env(pathlib.Path(tmp))
    prices, tech, turb, actions = panel(args.days, args.assets, args.seed)
    if args.mode == "fixture":
        if not args.out:
            ap.error("fixture needs OUT")
        holdings, total, amount_f32 = rollout(Env, prices, tech, turb, actions)
        write_fixture(args.out, prices, tech, turb, actions, holdings, total, amount_f32)
        print(f"wrote {args.out}: {len(actions)} steps x {args.assets} assets, final total asset {total[-1]:.2f}, "
              f"cash held as float32 on {int(amount_f32.sum())} steps")
        return
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        rollout(Env, prices, tech, turb, actions)
        best = min(best, time.perf_counter() - t0)
    steps = len(actions)
    print("finrl:    " if args.against else "", end="")
    print(json.dumps({"peer": "finrl-0.3.7-numpy", "envs": 1, "assets": args.assets, "steps": steps,
                      "seconds": best, "env_steps_per_s": steps / best,
                      "asset_steps_per_s": steps * args.assets / best}))
    if args.against:
        ours = json.loads(args.against)
        print(f"ratio:    tradebot {ours['env_steps_per_s']:,.0f} env-steps/s / FinRL {steps / best:,.0f} env-steps/s"
              f" = {ours['env_steps_per_s'] * best / steps:,.0f}x on the same work")


if __name__ == "__main__":
    main()
