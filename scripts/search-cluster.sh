#!/usr/bin/env bash
# `make search-cluster`: a search cluster on this box to try: PostgreSQL (Debian's package) on a temporary data
# directory, Optuna's gRPC storage proxy over it, two tradebot workers and one Python Optuna worker on loopback,
# and optuna-dashboard where it is installed. Prints where to look; once the workers end, the study stays up
# (HOLD seconds, or until Ctrl-C on a terminal), then it all stops.
# On several machines: the proxy on one (listening on an address the others reach), `tradebot tune ppo
# --storage grpc://HOST:PORT --study NAME` on each (docs/SEARCH.md, "A study shared with Optuna").
set -euo pipefail
PY="${PYENV:?PYENV: the project venv}/bin/python"
TB="${TB:-./target/release/tradebot}"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
PGPORT="${PGPORT:-54329}"
PROXY_PORT="${PROXY_PORT:-13000}"
DASH_PORT="${DASH_PORT:-8080}"
TRIALS="${TRIALS:-12}"
STUDY="${STUDY:-cluster}"
[ -x "$TB" ] || { echo "no $TB: run \`make build\` first"; exit 1; }
[ -x "$PGBIN/initdb" ] || { echo "no $PGBIN/initdb: install Debian's postgresql package (apt-get install postgresql)"; exit 1; }
"$PY" -c 'import psycopg2' 2>/dev/null || "$PY" -m pip install --quiet --disable-pip-version-check "psycopg2-binary==2.9.11"
WORK=$(mktemp -d /tmp/tradebot-cluster.XXXXXX)
chmod 755 "$WORK"
pids=()
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -m fast stop >/dev/null 2>&1 || true
    echo "stopped; logs kept in $WORK"
}
trap stop EXIT
mkdir -p "$WORK/pg"
[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg"
as_pg "$PGBIN/initdb" -D "$WORK/pg" -U optuna --auth=trust >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg/server.log" -w \
    -o "-p $PGPORT -k $WORK/pg -c listen_addresses=127.0.0.1" start >/dev/null
as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U optuna optuna
DB="postgresql+psycopg2://optuna@127.0.0.1:$PGPORT/optuna"
"$PY" scripts/optuna_peer.py proxy "$PROXY_PORT" "$DB" >"$WORK/proxy.log" 2>&1 & pids+=($!)
for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$PROXY_PORT") 2>/dev/null && break; sleep 0.2; done
(exec 3<>"/dev/tcp/127.0.0.1/$PROXY_PORT") 2>/dev/null || { cat "$WORK/proxy.log"; echo "Optuna's proxy did not start in 60s"; exit 1; }
URL="grpc://127.0.0.1:$PROXY_PORT"
for w in a b; do
    sed "s#^state_dir = \"./var\"#state_dir = \"$WORK/$w\"#" config/tradebot.toml >"$WORK/$w.toml"
    "$TB" tune ppo --config "$WORK/$w.toml" --storage "$URL" --study "$STUDY" --trials "$TRIALS" \
        --budget-steps "${BUDGET_STEPS:-16384}" >"$WORK/worker-$w.log" 2>&1 & pids+=($!)
done
workers=("${pids[@]:1:2}")
# The Python worker joins once a tradebot worker has created the study (with tradebot's settings and space).
for _ in $(seq 300); do
    grep -qs "study $STUDY \(created\|joined\)" "$WORK"/worker-*.log && break
    for p in "${workers[@]}"; do kill -0 "$p" 2>/dev/null || { tail -n 5 "$WORK"/worker-*.log; exit 1; }; done
    sleep 0.2
done
"$PY" scripts/optuna_peer.py worker "$PROXY_PORT" "$STUDY" 3 >"$WORK/python.log" 2>&1 & pids+=($!)
DASH="${PYENV}/bin/optuna-dashboard"
if [ -x "$DASH" ]; then
    "$DASH" "$DB" --host 127.0.0.1 --port "$DASH_PORT" >"$WORK/dashboard.log" 2>&1 & pids+=($!)
    echo "dashboard:   http://127.0.0.1:$DASH_PORT (optuna-dashboard over the database; its log: $WORK/dashboard.log)"
else
    echo "dashboard:   not installed (\`make search-cluster\` installs optuna-dashboard, or \`$PY -m pip install optuna-dashboard\`)"
fi
echo "storage:     $DB (PostgreSQL in $WORK/pg), through Optuna's gRPC proxy at $URL"
echo "workers:     tail -f $WORK/worker-a.log $WORK/worker-b.log $WORK/python.log"
echo "the study:   $TB tune show $STUDY --config $WORK/a.toml --storage $URL"
status=0
for p in "${workers[@]}"; do wait "$p" || status=1; done
"$TB" tune show "$STUDY" --config "$WORK/a.toml" --storage "$URL" || status=1
# The study stays up to look at: HOLD seconds, or until Ctrl-C on a terminal.
if [ -n "${HOLD:-}" ]; then
    echo "the study is done: the dashboard and the storage stay up for ${HOLD}s"
    sleep "$HOLD"
elif [ -t 0 ]; then
    echo "the study is done: the dashboard and the storage stay up until Ctrl-C"
    wait || true
fi
exit $status
