#!/usr/bin/env bash
# `make bench-cluster`: the same search run twice, one after the other on this machine: in one process
# (`tradebot tune ppo --parallel 2 --threads 2`: two trials training at once, one libtorch thread each) and
# by two tradebot workers through Optuna's gRPC storage proxy over SQLite (`--storage`, one trial at a time
# each, on one thread each: `--threads` defaults to 1 for a worker): the same trials (random sampler, the same seed: trial n draws the same
# parameters on both sides), the same cores. Prints trials per hour of each, the ratio (target: >= 0.9) and
# each worker's storage share (its time in storage calls over its trials' wall time, as the worker logs it).
#
# Every trial costs the same (a space of learning_rate and clip_range, no early stopping: reduction 1), so
# the one process's waves (its two trials judged together) do not wait on a slower partner and the ratio
# measures what the cluster adds: the storage's calls, the proxy's CPU and a second process.
set -euo pipefail
PY="${PYENV:?PYENV: the project venv}/bin/python"
TB="${TB:-./target/release/tradebot}"
TRIALS="${TRIALS:-16}"
BUDGET_STEPS="${BUDGET_STEPS:-16384}"
PORT="${PORT:-13017}"
[ -x "$TB" ] || { echo "no $TB: run \`make build\` first (or name a binary with TB=)"; exit 1; }
"$PY" -c 'import optuna, grpc' 2>/dev/null || { echo "Optuna and grpcio are missing from $PY: run \`make optuna\`"; exit 1; }
WORK=$(mktemp -d /tmp/tradebot-bench-cluster.XXXXXX)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop EXIT

# The bench's search: the demo config with a small env and a 2.5-year training range.
config() {
    "$PY" - "$1" "$2" <<'EOF'
import sys
s = open("config/tradebot.toml").read()
for a, b in [
    ('state_dir = "./var"', f'state_dir = "{sys.argv[2]}"'),
    ("[env]\n", "[env]\nn_envs = 4\nepisode_len = 40\n"),
    ("window_days = 3650\nholdout_days = 365", 'from = "2005-01-01"\nto = "2007-06-30"'),
    ("[tune]\n", '[tune]\nsampler = "random"\nvalidation_days = 60\nreduction = 1\nseed = 5\n'),
]:
    assert a in s, f"config/tradebot.toml lost {a!r}: update benches/cluster.sh"
    s = s.replace(a, b, 1)
s += '\n[tune.space]\nlearning_rate = { kind = "log", low = 1e-4, high = 3e-3 }\n' \
     'clip_range = { kind = "linear", low = 0.1, high = 0.3 }\n'
open(sys.argv[1], "w").write(s)
EOF
}
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
for c in single a b; do config "$WORK/$c.toml" "$WORK/$c"; done
run=(tune ppo --trials "$TRIALS" --budget-steps "$BUDGET_STEPS" --device cpu)

echo "one process: $TRIALS trials of $BUDGET_STEPS steps, 2 at a time ($TB)"
l0=$(load); t0=$(now)
"$TB" "${run[@]}" --config "$WORK/single.toml" --parallel 2 --threads 2 >"$WORK/single.log" 2>&1 ||
    { tail -n 5 "$WORK/single.log"; exit 1; }
t1=$(now); l1=$(load)
single_done=$(grep -c ' complete ' <("$TB" tune show latest --config "$WORK/single.toml") || true)

echo "two workers through Optuna's gRPC proxy over SQLite on 127.0.0.1:$PORT"
"$PY" scripts/optuna_peer.py proxy "$PORT" "sqlite:///$WORK/optuna.db" >"$WORK/proxy.log" 2>&1 & pids+=($!)
for _ in $(seq 150); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.2; done
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || { cat "$WORK/proxy.log"; echo "the proxy did not start"; exit 1; }
l2=$(load); t2=$(now)
for w in a b; do
    "$TB" "${run[@]}" --config "$WORK/$w.toml" --storage "grpc://127.0.0.1:$PORT" --study bench \
        >"$WORK/worker-$w.log" 2>&1 & pids+=($!)
done
status=0
for p in "${pids[@]:1:2}"; do wait "$p" || status=1; done
t3=$(now); l3=$(load)
[ $status = 0 ] || { tail -n 5 "$WORK"/worker-*.log; exit 1; }
cluster_done=$("$PY" -W ignore scripts/optuna_peer.py dump "$PORT" bench |
    "$PY" -c 'import json, sys; print(sum(t["state"] == "COMPLETE" for t in json.load(sys.stdin)["trials"]))')

"$PY" - "$single_done" "$t0" "$t1" "$cluster_done" "$t2" "$t3" "$WORK" "$l0 -> $l1" "$l2 -> $l3" <<'EOF'
import re, sys
n1, a, b, n2, c, d, work, l1, l2 = sys.argv[1:]
s_rate, c_rate = int(n1) / (float(b) - float(a)) * 3600, int(n2) / (float(d) - float(c)) * 3600
print(f"one process: {n1} trials complete in {float(b) - float(a):.1f}s: {s_rate:,.0f} trials/hour (load average {l1})")
print(f"two workers: {n2} trials complete in {float(d) - float(c):.1f}s: {c_rate:,.0f} trials/hour (load average {l2})")
for w in "ab":
    m = re.search(r"this worker's \d+ trials took.*", open(f"{work}/worker-{w}.log").read())
    print(f"worker {w}: {m.group(0) if m else 'no storage share logged (a tradebot without it?)'}")
print(f"ratio (two workers / one process): {c_rate / s_rate:.2f} (target >= 0.9)")
EOF
echo "logs: $WORK"
