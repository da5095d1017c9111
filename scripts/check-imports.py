#!/usr/bin/env python3
"""Checks the crate's module layering: every top-level module of src/ may use only modules in lower layers
(or its own). Reads `crate::<module>` paths in each module's files and fails with each offending file and
line. Test files (`tests.rs`, `*_tests.rs`) are skipped: a test may build its fixtures with higher modules
(the shipped bars through `data`, fills through `backtest::sim`) without making the code a cycle.
`--graph` prints the module graph.

Layers, lowest first; a module may import from any earlier layer and from modules of its own layer only
when listed in SAME_LAYER_OK (one direction)."""
import re
import sys
from pathlib import Path

LAYERS = [
    ["alloc", "logging", "native", "gpu", "domain", "calendar", "clock", "schedule", "optim", "readback", "autocast", "seeded", "out"],
    ["store", "features", "onnx", "feed"],
    ["env", "models"],
    ["config"],
    ["data", "policy", "control", "alpaca", "alerts"],
    ["fuzzing"],
    ["risk", "rl", "lstm", "metrics"],
    ["engine::contract"],
    ["oms"],
    ["broker"],
    ["engine"],
    ["live"],
    ["backtest"],
    ["retrain"],
    ["training"],
    ["tune"],
    ["web"],
    ["daemon", "bench"],
    ["cli"],
]

# (lower, upper): `upper` may use `lower` although both sit in one layer.
SAME_LAYER_OK = set()

SRC = Path(__file__).resolve().parent.parent / "src"
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*(?:::contract\b)?)")
USE_GROUP = re.compile(r"\buse\s+crate::\{([^;]*)\}", re.S)


# Submodules that are nodes of their own: the engine's contract sits below the order manager.
OWN_NODES = {"engine::contract"}


def module_of(path: Path) -> str | None:
    rel = path.relative_to(SRC)
    if len(rel.parts) == 2 and f"{rel.parts[0]}::{Path(rel.parts[1]).stem}" in OWN_NODES:
        return f"{rel.parts[0]}::{Path(rel.parts[1]).stem}"
    if len(rel.parts) == 1:
        stem = rel.stem
        return None if stem in ("lib", "main") else stem
    return rel.parts[0]


def refs(text: str):
    """(line number, module) for every crate-rooted path, `use crate::{a, b::c}` groups included."""
    for m in PATH.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)
    for m in USE_GROUP.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for item in m.group(1).split(","):
            name = item.strip().split("::")[0].strip()
            if re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                yield line, name


def main() -> int:
    layer = {m: i for i, mods in enumerate(LAYERS) for m in mods}
    graph: dict[str, set[str]] = {}
    errors = []
    for f in sorted(SRC.rglob("*.rs")):
        src_mod = module_of(f)
        if src_mod is None or f.name == "tests.rs" or f.name.endswith("_tests.rs"):
            continue
        if src_mod not in layer:
            errors.append(f"{f.relative_to(SRC.parent)}: module `{src_mod}` is in no layer: add it to LAYERS in {Path(__file__).name}")
            continue
        for line, dst in refs(f.read_text()):
            if dst.endswith("::contract") and dst not in OWN_NODES:
                dst = dst.split("::")[0]
            if dst == src_mod or dst not in layer:
                continue  # a crate-root item (a re-export or macro), not a module
            graph.setdefault(src_mod, set()).add(dst)
            if layer[dst] > layer[src_mod] or (
                layer[dst] == layer[src_mod] and (dst, src_mod) not in SAME_LAYER_OK
            ):
                errors.append(
                    f"{f.relative_to(SRC.parent)}:{line}: `{src_mod}` (layer {layer[src_mod]}) uses `{dst}` (layer {layer[dst]})"
                )
    if "--graph" in sys.argv:
        for m in sorted(graph):
            print(f"{m} -> {', '.join(sorted(graph[m]))}")
    for e in sorted(set(errors)):
        print(e)
    if errors:
        print(f"{len(set(errors))} layering violation(s): a module may use only modules of lower layers (scripts/check-imports.py)")
        return 1
    print(f"module layering: {sum(len(v) for v in graph.values())} module edges, no upward import, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
