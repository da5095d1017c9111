# tradebot — two commands on a fresh clone:
#   make run    the main job (the daemon in paper mode on the embedded replay data)
#   make test   the whole test suite (what CI runs, via .ci/run)
#
# Native libraries come from PyPI wheels in a venv kept outside the clone, keyed by version, installed once:
# torch==2.11.0 (libtorch for tch), onnxruntime==1.31.1 (for ort, loaded at run time), onnx (model checker).

TORCH_VERSION := 2.11.0
ORT_VERSION   := 1.31.1
PYENV ?= $(HOME)/.cache/tradebot/py-torch$(TORCH_VERSION)-ort$(ORT_VERSION)
PYTHON ?= python3
STAMP := $(PYENV)/.tradebot-complete
CARGO ?= cargo

# Evaluated in each recipe's shell, after the venv exists.
CARGO_ENV = TRADEBOT_PYENV=$(PYENV) LIBTORCH="$$(ls -d $(PYENV)/lib/python3*/site-packages/torch | head -n1)"

.PHONY: all venv optuna chart-assets search-cluster build release-deps run test test-build test-run test-tools test-gpu lint fmt check-inference-only clean bench-env bench-ppo bench-lstm bench-infer bench-tune bench-cluster bench-gpu gpu-kit gpu-check install chromium systemd-tools

all: build

# Idempotent: skipped when the stamp exists. An interrupted install leaves no stamp and is redone from scratch.
venv: $(STAMP)
$(STAMP):
	@command -v $(PYTHON) >/dev/null || { echo "python3 is required (with the venv module) to install libtorch and ONNX Runtime"; exit 1; }
	rm -rf "$(PYENV)"
	mkdir -p "$(dir $(PYENV))"
	$(PYTHON) -m venv "$(PYENV)"
	"$(PYENV)/bin/python" -m pip install --no-cache-dir --disable-pip-version-check --progress-bar off \
		"torch==$(TORCH_VERSION)" "onnxruntime==$(ORT_VERSION)" onnx numpy
	touch "$(STAMP)"

# The dashboard's charting library: TradingView Lightweight Charts (Apache-2.0), the standalone build that
# the PyPI package lightweight-charts ships (its wheel, pinned by hash; nothing else of it is used), put in
# assets/vendor/ (not committed) and bundled into the binary by build.rs. Without it the dashboard says
# that its charts are unavailable and how to get them.
CHARTS_PYPI_VERSION := 2.1
CHARTS_WHEEL_SHA256 := 4c5598fd57ac7569c3fed733727e2033190ca2f6e2460223d27e0926be7bff4f
CHARTS_JS := assets/vendor/lightweight-charts.js
chart-assets: $(CHARTS_JS)
$(CHARTS_JS): | $(STAMP)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	echo "lightweight-charts==$(CHARTS_PYPI_VERSION) --hash=sha256:$(CHARTS_WHEEL_SHA256)" > "$$tmp/req.txt" && \
	"$(PYENV)/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
		-r "$$tmp/req.txt" -d "$$tmp" && \
	"$(PYENV)/bin/python" -c 'import sys, zipfile, glob; \
		js = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0]).read("lightweight_charts/js/lightweight-charts.js"); \
		assert b"TradingView Lightweight Charts" in js and b"Apache License 2.0" in js, "not the expected library"; \
		open(sys.argv[2] + ".part", "wb").write(js)' "$$tmp" "$@" && \
	mv "$@.part" "$@" && echo "chart-assets: $@ (TradingView Lightweight Charts, from PyPI lightweight-charts $(CHARTS_PYPI_VERSION))"

# On a fresh machine (no venv yet) the dependencies that do not need libtorch are compiled while pip downloads
# it (release-deps, beside venv): only torch-sys, tch and the crate are left for after. Where the venv exists
# that step is skipped, since it would rerun torch-sys's build script without LIBTORCH.
build:
	@+$(MAKE) --no-print-directory -j3 venv chart-assets $(if $(wildcard $(STAMP)),,release-deps)
	+$(CARGO_ENV) $(CARGO) build --release

# Everything `cargo build --release` compiles that does not depend on torch-sys, with LIBTORCH unset: torch-sys's
# build script fails (expected: no libtorch yet) and --keep-going builds the rest. Its log is
# target/release-deps.log; any real error shows again in the build that follows.
release-deps:
	@mkdir -p target && echo "release-deps: the dependencies that need no libtorch, built while the venv installs (log: target/release-deps.log)"
	+@env -u LIBTORCH TRADEBOT_PYENV=$(PYENV) $(CARGO) build --release --keep-going >target/release-deps.log 2>&1 || true

run: build
	./target/release/tradebot run --config config/tradebot.toml

# The inference-only daemon (`--no-default-features`) passes clippy, and libtorch (torch-sys) is not in its
# dependency graph, so it cannot link it. A check, not a build: the test build below compiles the crate once
# more, so a second debug binary is not compiled and linked only to be read with ldd. It needs no venv
# (ONNX Runtime is loaded at run time), so `make test` runs it while the venv downloads.
check-inference-only:
	+TRADEBOT_PYENV=$(PYENV) $(CARGO) clippy --no-default-features --lib --bins -- -D warnings
	@if $(CARGO) tree --no-default-features -e normal,build -i torch-sys >/dev/null 2>&1; then \
		echo "the inference-only build depends on torch-sys (libtorch): see \`cargo tree --no-default-features -i torch-sys\`"; exit 1; fi
	@echo "inference-only build: clippy clean, no libtorch (torch-sys) in its dependency graph"

# Clippy with the GPU tests compiled in (feature `gpu-tests` only adds tests), so that they cannot rot
# on machines without a GPU: one pass covers the default build and them.
lint: venv
	$(PYTHON) scripts/check-imports.py
	$(PYTHON) scripts/check-sizes.py
	$(CARGO) fmt --check
	+$(CARGO_ENV) $(CARGO) clippy --all-targets --features gpu-tests -- -D warnings

# Debian packages the tests run (never build) with, installed as root or through sudo, once: $(1) is the list.
APT_INSTALL = if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1); \
	else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1); fi
HAVE_CHROMIUM = command -v chromium >/dev/null 2>&1
HAVE_SYSTEMD_TOOLS = command -v systemd-analyze >/dev/null 2>&1 && command -v systemd-sysusers >/dev/null 2>&1
# tests/tune_cluster.rs's PostgreSQL (Debian 12's postgresql, version 15).
HAVE_POSTGRESQL = test -x /usr/lib/postgresql/15/bin/initdb

# Headless Chromium for the dashboard's browser test (Debian's package).
chromium:
	@$(HAVE_CHROMIUM) || { $(call APT_INSTALL,chromium); }

# systemd-analyze and systemd-sysusers for tests/systemd.rs (Debian's systemd package).
systemd-tools:
	@$(HAVE_SYSTEMD_TOOLS) || { $(call APT_INSTALL,systemd); }

# What `make test` installs with apt, in one apt-get run (two at once would wait on dpkg's lock).
test-tools:
	@pkgs=""; $(HAVE_CHROMIUM) || pkgs="chromium"; $(HAVE_SYSTEMD_TOOLS) || pkgs="$$pkgs systemd"; \
	$(HAVE_POSTGRESQL) || pkgs="$$pkgs postgresql"; \
	if [ -n "$$pkgs" ]; then echo "test-tools: installing Debian's$$pkgs"; $(call APT_INSTALL,$$pkgs); fi

# Optuna (PyPI) in the venv, for the test that loads `tradebot tune`'s journal export with Optuna's own storage,
# grpcio for Optuna's gRPC storage proxy and psycopg2 for its PostgreSQL storage (tests/tune_cluster.rs: workers on
# one study through the proxy, over SQLite and over PostgreSQL).
OPTUNA_VERSION := 4.6.0
GRPCIO_VERSION := 1.76.0
PSYCOPG2_VERSION := 2.9.11
optuna: venv
	@"$(PYENV)/bin/python" -c 'import optuna, grpc, psycopg2; assert optuna.__version__ == "$(OPTUNA_VERSION)" and grpc.__version__ == "$(GRPCIO_VERSION)" and psycopg2.__version__.startswith("$(PSYCOPG2_VERSION) ")' 2>/dev/null || \
		"$(PYENV)/bin/python" -m pip install --quiet --disable-pip-version-check "optuna==$(OPTUNA_VERSION)" "grpcio==$(GRPCIO_VERSION)" "psycopg2-binary==$(PSYCOPG2_VERSION)"

# A search cluster on this box to try (scripts/search-cluster.sh): PostgreSQL from Debian's package on a temporary
# data directory, Optuna's gRPC proxy over it, two tradebot workers and one Python worker, and optuna-dashboard
# (PyPI, pinned; installed into the venv here, not for `make test`); it prints where to look. TB=path: another
# tradebot binary (no release build then); TRIALS, BUDGET_STEPS: the study's size; it stays up after the workers
# end until Ctrl-C (HOLD=N: N seconds).
OPTUNA_DASHBOARD_VERSION := 0.21.0
TB ?=
search-cluster: optuna $(if $(TB),,build)
	@"$(PYENV)/bin/python" -c 'import optuna_dashboard as d; assert d.__version__ == "$(OPTUNA_DASHBOARD_VERSION)"' 2>/dev/null || \
		"$(PYENV)/bin/python" -m pip install --quiet --disable-pip-version-check "optuna-dashboard==$(OPTUNA_DASHBOARD_VERSION)"
	PYENV="$(PYENV)" TB="$(or $(TB),./target/release/tradebot)" scripts/search-cluster.sh

# The same search in one process (2 trials at a time) and by two tradebot workers through Optuna's gRPC proxy
# over SQLite (benches/cluster.sh), one after the other: trials/hour of each, the ratio (target >= 0.9) and each
# worker's storage share of its trials' wall time. TB=path: another tradebot binary (no release build then).
bench-cluster: optuna $(if $(TB),,build)
	PYENV="$(PYENV)" TB="$(or $(TB),./target/release/tradebot)" benches/cluster.sh

# `make test` is one graph run TEST_JOBS steps at a time (cargo shares make's job slots): the downloads (venv,
# then chart-assets and optuna; test-tools' apt) go on beside the compiles; check-inference-only needs no
# venv and starts at once; lint's clippy and the test build follow when the venv is there; the tests run
# when all of it is done. The cargo steps take turns (cargo locks the target directory; one directory, so
# that build scripts such as torch-sys's C++ wrapper are compiled once). Any step's failure fails
# `make test`, with its message and make naming the step.
TEST_JOBS ?= 4

test:
	@+$(MAKE) --no-print-directory -j$(TEST_JOBS) test-run
	@if nvidia-smi -L >/dev/null 2>&1; then $(MAKE) test-gpu; \
	else echo "no NVIDIA GPU: the CUDA tests (feature gpu-tests) were not built; \`make test-gpu\` runs them on a GPU"; fi

# The steps of `make test` (see above).
test-build: venv chart-assets
	+$(CARGO_ENV) $(CARGO) test --all-targets --no-run

# CI=1: a test whose tool is missing fails instead of skipping (tests/systemd.rs). The test binaries run two at
# a time (`cargo test` runs them one after another, leaving a core idle for most of the soak, whose daemon
# needs little CPU but needs it on time), in this order as slots free: the soak beside the daemon's tests,
# the library's and PPO on CartPole's (the heaviest two not beside each other: both keep two threads busy),
# then the lighter ones; every other binary (a new file in tests/ included) after them. Each is `cargo test`
# of that target, as alone; make's -k runs every binary and names each that failed.
# TEST_BINARIES_AT_ONCE=1 runs them one after another. (make notes "-j2 forced in submake: resetting jobserver
# mode": the binaries take two slots of their own, whatever TEST_JOBS gave the steps before them.)
TEST_BINARIES_FIRST := soak daemon lib ppo_cartpole risk tune_cluster cli ppo_trading tune planted_gate \
	train_ppo train_lstm retrain_status
TEST_BINARIES := $(TEST_BINARIES_FIRST) $(filter-out $(TEST_BINARIES_FIRST),bins \
	$(patsubst tests/%.rs,%,$(wildcard tests/*.rs)) $(patsubst tests/%/main.rs,%,$(wildcard tests/*/main.rs)))
TEST_BINARIES_AT_ONCE ?= 2
test-run: test-build lint check-inference-only optuna test-tools
	@+$(MAKE) --no-print-directory -k -j$(TEST_BINARIES_AT_ONCE) --output-sync=target $(addprefix test-binary-,$(TEST_BINARIES))

TEST_FILES := $(filter-out lib bins,$(TEST_BINARIES))
.PHONY: test-binary-lib test-binary-bins $(addprefix test-binary-,$(TEST_FILES))
test-binary-lib:
	CI=1 $(CARGO_ENV) $(CARGO) test --lib
test-binary-bins:
	CI=1 $(CARGO_ENV) $(CARGO) test --bins
$(addprefix test-binary-,$(TEST_FILES)): test-binary-%:
	CI=1 $(CARGO_ENV) $(CARGO) test --test $*

# The tests that need a CUDA GPU, and only them: compiled with the feature `gpu-tests` (which `make test`,
# run by CI without a GPU, leaves off), each in a `gpu_tests` module; each fails without a GPU.
GPU_TEST_FILTER := gpu_tests::
test-gpu: venv
	$(CARGO_ENV) $(CARGO) test --features gpu-tests --lib -- $(GPU_TEST_FILTER)

fmt:
	$(CARGO) fmt

clean:
	$(CARGO) clean

# The environment against FinRL 0.3.7's numpy env on the same work (1 env x 30 assets, episodes of 2,519 steps, FinRL's
# rules), then batched throughput. FinRL is fetched with pip at run time (needs PyPI and gymnasium).
BENCH_ENVS ?= 1024
bench-env: build
	@"$(PYENV)/bin/python" -c 'import gymnasium' 2>/dev/null || "$(PYENV)/bin/python" -m pip install --quiet gymnasium
	@tb=$$(./target/release/tradebot bench env --envs 1 --assets 30 --steps 25190 --episode-len 2519 --finrl --json) && \
	echo "tradebot: $$tb" && \
	"$(PYENV)/bin/python" benches/peers/finrl_env.py time --against "$$tb" && \
	./target/release/tradebot bench env --envs $(BENCH_ENVS) --assets 30 --steps 200 --episode-len 252

# End-to-end PPO training (rollouts + updates) against Stable-Baselines3 2.9.2 PPO on FinRL's numpy env, the same
# work: 1 env x 30 assets, [64, 64] tanh, n_steps 2048, batch 64, 10 epochs, 4,096 steps, CPU, one torch thread.
# SB3 and gymnasium are installed into the venv when missing (needs PyPI); FinRL's env file is fetched as for bench-env.
bench-ppo: build
	@"$(PYENV)/bin/python" -c 'import gymnasium, stable_baselines3 as s; assert s.__version__ == "2.9.2"' 2>/dev/null || \
		"$(PYENV)/bin/python" -m pip install --quiet gymnasium "stable-baselines3==2.9.2"
	@tb=$$(./target/release/tradebot bench ppo --json) && \
	echo "tradebot: $$tb" && \
	"$(PYENV)/bin/python" benches/peers/sb3_ppo.py --against "$$tb"

# A search's training work: 8 trials of the same network and steps, 2 at a time (both cores), tradebot's
# population against Optuna 4.6 (journal storage, a worker process per core) driving Stable-Baselines3 2.9.2 PPO on
# FinRL's numpy env, the same trials' parameters enqueued; prints trials/hour and the ratio.
bench-tune: build optuna
	@"$(PYENV)/bin/python" -c 'import gymnasium, stable_baselines3 as s; assert s.__version__ == "2.9.2"' 2>/dev/null || \
		"$(PYENV)/bin/python" -m pip install --quiet gymnasium "stable-baselines3==2.9.2"
	@tb=$$(./target/release/tradebot bench tune --json) && \
	echo "tradebot: $$tb" && \
	"$(PYENV)/bin/python" benches/peers/optuna_sb3.py --against "$$tb"

# The GPU figures in one run (env kernel at E = 1024/4096/16384 x A = 30, PPO [256, 256] and [2048, 1024, 512] at
# E = 4096, the LSTM's 490k-sample epoch; GPU busy % by NVML), appended to benches/RESULTS.md. "no GPU" and exit 1
# without one. On a GPU machine without this venv, point LD_LIBRARY_PATH at its own torch's lib directory.
# A GPU machine has no package index and no copy of this project's venv. `make gpu-kit` (here) puts in
# target/gpu-kit: the stripped release binary, the stripped GPU test binary (the library's tests built with
# `gpu-tests`), the shipped daily bars the tests read, the peers' scripts and pure-Python wheels, and
# scripts/gpu-check.sh; then packs that folder into target/gpu-kit.tar.gz (about a third of its size), the
# file to carry: at most GPU_KIT_MAX_MIB, so that it travels with the checkout within 64 MiB. `make
# gpu-check` (there; it unpacks the archive when the folder is absent; or the kit's gpu-check.sh, without a
# checkout) runs doctor, the GPU tests and `bench gpu --quick` from the kit alone against the machine's own
# PyTorch and onnxruntime, in under 8 minutes, and writes target/gpu-kit/gpu-check-results.md. `make
# bench-gpu` (there) runs the full measurements with the kit's binary: its libtorch, its NVRTC, its Python
# for the peers (PEER_PYTHON, python3 by default). Without a kit it builds and uses the venv.
GPU_KIT := target/gpu-kit
GPU_KIT_ARCHIVE := target/gpu-kit.tar.gz
GPU_KIT_MAX_MIB := 40
PEER_WHEELS := stable-baselines3==2.9.2 gymnasium==1.4.0 cloudpickle==3.1.3 farama-notifications==0.0.6 \
	typing-extensions==4.16.0 finrl==0.3.7
gpu-kit: build
	@tests=$$($(CARGO_ENV) $(CARGO) test --features gpu-tests --lib --no-run --message-format=json \
		| "$(PYENV)/bin/python" -c 'import json, sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["lib"]][-1])') && \
	rm -rf $(GPU_KIT) $(GPU_KIT_ARCHIVE) && mkdir -p $(GPU_KIT)/wheelhouse $(GPU_KIT)/data $(GPU_KIT)/benches/peers && \
	strip -o $(GPU_KIT)/tradebot target/release/tradebot && \
	strip -o $(GPU_KIT)/tradebot-gpu-tests "$$tests" && \
	echo "$(GPU_TEST_FILTER)" > $(GPU_KIT)/gpu-test-filter
	cp data/stocks-daily-2000-2013.csv.gz $(GPU_KIT)/data/
	cp benches/peers/*.py $(GPU_KIT)/benches/peers/
	cp scripts/gpu-check.sh $(GPU_KIT)/gpu-check.sh
	echo "tradebot $$(git describe --always --dirty 2>/dev/null || echo unknown), kit built $$(date -u '+%Y-%m-%d %H:%M UTC')" > $(GPU_KIT)/VERSION
	"$(PYENV)/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps -d $(GPU_KIT)/wheelhouse $(PEER_WHEELS)
	tar czf $(GPU_KIT_ARCHIVE) -C $(dir $(GPU_KIT)) $(notdir $(GPU_KIT))
	@du -sh $(GPU_KIT)/* | sort -h; mib=$$(( ($$(stat -c %s $(GPU_KIT_ARCHIVE)) + 1048575) / 1048576 )); \
	echo "gpu kit: $$(du -sm $(GPU_KIT) | cut -f1) MiB in $(GPU_KIT), packed in $(GPU_KIT_ARCHIVE): $$mib MiB (at most $(GPU_KIT_MAX_MIB)): carry that file"; \
	if [ "$$mib" -gt $(GPU_KIT_MAX_MIB) ]; then echo "the packed GPU kit is $$mib MiB, over $(GPU_KIT_MAX_MIB) MiB: it cannot travel with the checkout"; exit 1; fi

# On the GPU machine, from the kit alone (no cargo, no venv, no network): see gpu-check.sh. The peers and
# the tests use PEER_PYTHON's PyTorch and onnxruntime (this checkout's venv where it exists, else python3).
PEER_PYTHON ?= $(if $(wildcard $(PYENV)/bin/python),$(PYENV)/bin/python,python3)
gpu-check:
	@if [ ! -x $(GPU_KIT)/gpu-check.sh ] && [ -f $(GPU_KIT_ARCHIVE) ]; then tar xzf $(GPU_KIT_ARCHIVE) -C $(dir $(GPU_KIT)); fi
	@test -x $(GPU_KIT)/gpu-check.sh || { echo "no GPU kit in $(GPU_KIT) or $(GPU_KIT_ARCHIVE): run \`make gpu-kit\` where the project builds, and carry $(GPU_KIT_ARCHIVE)"; exit 1; }
	PEER_PYTHON="$(PEER_PYTHON)" $(GPU_KIT)/gpu-check.sh

bench-gpu:
	@if [ ! -x $(GPU_KIT)/tradebot ] && [ -f $(GPU_KIT_ARCHIVE) ]; then tar xzf $(GPU_KIT_ARCHIVE) -C $(dir $(GPU_KIT)); fi
	@if [ -x $(GPU_KIT)/tradebot ]; then \
		py=$${PEER_PYTHON:-python3}; \
		torch=$$($$py -c 'import torch, os; print(os.path.dirname(torch.__file__))') || exit 1; \
		LD_LIBRARY_PATH="$$torch/lib:$$LD_LIBRARY_PATH" $(GPU_KIT)/tradebot bench gpu --results benches/RESULTS.md \
			--python "$$py" --wheelhouse $(GPU_KIT)/wheelhouse; \
	else \
		$(MAKE) build && ./target/release/tradebot bench gpu --results benches/RESULTS.md --python "$(PYENV)/bin/python"; \
	fi

# LSTM training throughput: tradebot (device-resident panels, windows gathered by index) against the same
# model in PyTorch with a DataLoader of materialised windows, on the same synthetic data.
LSTM_SAMPLES ?= 490000
bench-lstm: build
	@tb=$$(./target/release/tradebot bench lstm --samples $(LSTM_SAMPLES) --dump target/bench-lstm --json) && \
	echo "tradebot: $$tb" && \
	"$(PYENV)/bin/python" benches/peers/lstm_torch.py target/bench-lstm --against "$$tb"

# Per-decision latency of the PPO path (features + inference + strategy + risk), then onnxruntime's Python API
# on the same ONNX file and observations, both on one core.
bench-infer: build
	@d=$$(mktemp -d) && taskset -c 0 ./target/release/tradebot bench infer --export $$d --json && \
	taskset -c 0 "$(PYENV)/bin/python" benches/peers/ort_python.py $$d

# Install as a system service (run as root): the venv under /opt so that the binary's rpath (libtorch) and
# ONNX Runtime stay readable under the unit's ProtectHome=yes; binary, unit, sysusers.d entry, and a paper
# config when none exists. Then: put the Alpaca keys in /etc/tradebot/credentials/ and start the service.
PREFIX ?= /usr/local
SYSTEM_PYENV ?= /opt/tradebot/py-torch$(TORCH_VERSION)-ort$(ORT_VERSION)
install:
	$(MAKE) build PYENV=$(SYSTEM_PYENV)
	install -D -m 0755 target/release/tradebot $(DESTDIR)$(PREFIX)/bin/tradebot
	install -d -m 0755 $(DESTDIR)$(PREFIX)/share/tradebot/models
	cp -r models/. $(DESTDIR)$(PREFIX)/share/tradebot/models/
	install -D -m 0644 systemd/tradebot.service $(DESTDIR)/etc/systemd/system/tradebot.service
	install -D -m 0644 systemd/tradebot.sysusers $(DESTDIR)/usr/lib/sysusers.d/tradebot.conf
	install -d -m 0750 $(DESTDIR)/etc/tradebot
	install -d -m 0700 $(DESTDIR)/etc/tradebot/credentials
	test -e $(DESTDIR)/etc/tradebot/tradebot.toml || install -m 0640 config/alpaca-paper.toml $(DESTDIR)/etc/tradebot/tradebot.toml
	if [ -z "$(DESTDIR)" ]; then systemd-sysusers /usr/lib/sysusers.d/tradebot.conf && chgrp tradebot /etc/tradebot /etc/tradebot/tradebot.toml && systemctl daemon-reload; fi
	@echo "installed; next: the two key files in /etc/tradebot/credentials/, then systemctl enable --now tradebot"
