"""Times onnxruntime's Python API on the ONNX file and observations `tradebot bench infer --export DIR`
wrote: one observation per `session.run` call (as a live decision is), one intra-op thread; prints p50 and
p99 per call in µs as one line of JSON.

    python benches/peers/ort_python.py DIR [--calls N]
"""
import argparse
import json
import os
import time

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    s = ort.InferenceSession(os.path.join(a.dir, "model.onnx"), opts, providers=["CPUExecutionProvider"])
    d = s.get_inputs()[0].shape[1]
    obs = np.fromfile(os.path.join(a.dir, "obs.bin"), dtype="<f4").reshape(-1, d)
    rows = [obs[i : i + 1].copy() for i in range(len(obs))]
    for r in rows[:100]:
        s.run(["action"], {"obs": r})
    lat = []
    for i in range(a.calls):
        r = rows[i % len(rows)]
        t0 = time.perf_counter_ns()
        s.run(["action"], {"obs": r})
        lat.append((time.perf_counter_ns() - t0) / 1e3)
    lat.sort()
    pick = lambda p: lat[round((len(lat) - 1) * p)]
    print(json.dumps({"peer": "onnxruntime-python", "version": ort.__version__, "obs_dim": d,
                      "calls": len(lat), "p50_us": pick(0.5), "p99_us": pick(0.99)}))


if __name__ == "__main__":
    main()
