#!/usr/bin/env bash
# The GPU check, run on a GPU machine from the kit alone (`make gpu-kit` builds it; this script is copied
# into it): no cargo, no venv, no network. Against the machine's own PyTorch (its libtorch and NVRTC) and
# onnxruntime, found through PEER_PYTHON (python3 by default), it runs, each step under its own time limit
# so that the whole stays under 8 minutes:
#   1. PyTorch      where the machine's torch (its lib folder) and onnxruntime are
#   2. doctor       `tradebot doctor --gpu`: CUDA, NVRTC, NVML, compute capability, driver ("no GPU" and
#                   exit 1 without one: the check stops there)
#   3. GPU tests    the library's GPU tests (feature `gpu-tests`, filter `gpu_tests::`)
#   4. bench gpu    `tradebot bench gpu --quick` (every measurement and peer runs once, reduced sizes)
# It prints each step's time, writes gpu-check-results.md in the kit (Markdown for benches/RESULTS.md:
# device, driver, the commands, each step's result and time) and the steps' logs in gpu-check-logs/, and
# exits 1 if any step failed (a failed PyTorch or doctor step stops the check).
set -u

kit=$(cd "$(dirname "$0")" && pwd)
cd "$kit" || exit 1
py=${PEER_PYTHON:-python3}
results=${GPU_CHECK_RESULTS:-$kit/gpu-check-results.md}
logs=$kit/gpu-check-logs
# Seconds per step; their sum (with the kit's own overhead) stays under the 8-minute budget.
limit_torch=${GPU_CHECK_LIMIT_TORCH:-30}
limit_doctor=${GPU_CHECK_LIMIT_DOCTOR:-40}
limit_tests=${GPU_CHECK_LIMIT_TESTS:-120}
limit_bench=${GPU_CHECK_LIMIT_BENCH:-280}
filter=$(cat "$kit/gpu-test-filter" 2>/dev/null || echo "gpu_tests::")

rm -rf "$logs" && mkdir -p "$logs" || exit 1
started=$(date +%s.%N)
failed=0
rows=()

secs_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# step NAME LIMIT COMMAND...: runs COMMAND with its output shown and kept in the step's log; records its
# result and time. Returns COMMAND's status (124 when it ran past LIMIT seconds).
step() {
    local name=$1 limit=$2
    shift 2
    local log="$logs/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '-').log" t0 rc secs result why shown="$*"
    t0=$(date +%s.%N)
    echo "== $name: $shown (limit ${limit} s)"
    if declare -F "$1" >/dev/null; then
        # A function of this script (quick, host-only): run as is.
        { "$@"; echo $? >"$log.rc"; } 2>&1 | tee "$log"
        shown="$py -c 'import torch, onnxruntime'"
    else
        # timeout signals the command's whole process group (the bench's children too).
        { timeout --kill-after=5 "$limit" "$@"; echo $? >"$log.rc"; } 2>&1 | tee "$log"
    fi
    rc=$(cat "$log.rc") && rm -f "$log.rc"
    secs=$(secs_since "$t0")
    if [ "$rc" = 0 ]; then
        result="ok"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        result="**failed**: ran past its ${limit} s limit"
        failed=1
    else
        # The line that says why: the last error-like line, else the last line.
        why=$(grep -E -i 'no GPU|error|panicked|failed|not found|no such' "$log" | tail -n 1)
        [ -n "$why" ] || why=$(grep -v '^\s*$' "$log" | tail -n 1)
        result="**failed** (exit $rc): $(echo "$why" | cut -c1-200 | tr '|' '/')"
        failed=1
    fi
    # A test run's summary line says what passed.
    local summary
    summary=$(grep -E '^test result:' "$log" | tail -n 1 | sed 's/; finished in.*//')
    [ -n "$summary" ] && result="$result ($summary)"
    echo "== $name: $result, ${secs} s"
    rows+=("| $name | \`$shown\` | $result | $secs s |")
    return "$rc"
}

write_results() {
    local total device driver cuda torch ort
    torch=$(sed -n 's/^TORCH=//p' "$logs/env" 2>/dev/null)
    ort=$(sed -n 's/^ORT=//p' "$logs/env" 2>/dev/null)
    total=$(secs_since "$started")
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        device=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -n 1)
        driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
        cuda=$(nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | head -n 1)
    else
        device="none (nvidia-smi finds no NVIDIA GPU)"
        driver="none"
        cuda=""
    fi
    {
        echo "## GPU check (\`make gpu-check\`), $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo
        echo "Device: $device; driver $driver${cuda:+ ($cuda)}; PyTorch ${torch:-not found} and onnxruntime ${ort:-not found} ($py); $(cat "$kit/VERSION" 2>/dev/null || echo 'kit version unknown')."
        echo
        echo "| step | command | result | time |"
        echo "| --- | --- | --- | --- |"
        printf '%s\n' "${rows[@]}"
        echo
        echo "Total: $total s (budget 480 s); $([ "$failed" = 0 ] && echo "every step passed" || echo "**a step failed**: its log is in gpu-check-logs/")."
        if [ -s "$logs/bench-gpu.md" ]; then
            cat "$logs/bench-gpu.md"
        fi
    } >"$results"
    echo "== total: $total s (budget 480 s); results in $results"
}

finish() {
    write_results
    exit "$failed"
}

# 1. The machine's PyTorch (libtorch, NVRTC) and onnxruntime, through its Python (one start of it).
probe='
import glob, os, torch
print("LD_LIBRARY_PATH=" + os.path.join(os.path.dirname(torch.__file__), "lib"))
print("TORCH=%s (CUDA %s)" % (torch.__version__, torch.version.cuda))
try:
    import onnxruntime as o
    print("ORT=" + o.__version__)
    for p in sorted(glob.glob(os.path.join(os.path.dirname(o.__file__), "capi", "libonnxruntime.so*")))[:1]:
        print("ORT_DYLIB_PATH=" + p)
except ImportError as e:
    print("ORT=not found (%s)" % e)
'
torch_env() {
    "$py" -c "$probe" >"$logs/env" || {
        echo "no PyTorch: \`$py -c 'import torch'\` failed (set PEER_PYTHON to a Python with torch)"
        return 1
    }
    cat "$logs/env"
    local lib
    lib=$(sed -n 's/^LD_LIBRARY_PATH=//p' "$logs/env")
    [ -e "$lib/libtorch_cpu.so" ] || { echo "no libtorch_cpu.so in $lib"; return 1; }
    grep -q '^ORT_DYLIB_PATH=' "$logs/env" || echo "no onnxruntime library in $py: the ONNX export test will fail"
}
step "PyTorch" "$limit_torch" torch_env || finish
while IFS='=' read -r k v; do
    [ "$k" = LD_LIBRARY_PATH ] && export LD_LIBRARY_PATH="$v${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [ "$k" = ORT_DYLIB_PATH ] && export ORT_DYLIB_PATH="$v"
done <"$logs/env"

# 2. doctor: without a usable GPU the check ends here.
step "doctor" "$limit_doctor" ./tradebot doctor --gpu || finish

# 3. The GPU tests (they read the shipped bars from the kit's data/).
export TRADEBOT_SOURCE_DIR="$kit"
step "GPU tests" "$limit_tests" ./tradebot-gpu-tests "$filter"

# 4. Every GPU measurement and peer once, with the peers' wheels from the kit.
step "bench gpu --quick" "$limit_bench" ./tradebot bench gpu --quick --results "$logs/bench-gpu.md" \
    --python "$py" --wheelhouse "$kit/wheelhouse"

finish
