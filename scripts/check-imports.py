#!/usr/bin/env python3
"""Checks the crate's module layering: every top-level module of src/ may use only modules in lower layers
(or its own). Reads `crate::<module>` paths in each module's files and fails with each offending file and
line. Test files (`tests.rs`, every file under a `tests/` folder of src/, and `gpu_tests.rs`) are skipped: a
test may build its fixtures with higher modules (the shipped bars through `data`, fills through
`backtest::sim`) without making the code a cycle. scripts/check-sizes.py fails on any other test file name.
`--graph` prints the module graph.

Inside each module the files must not import each other in a circle either: every `crate::`, `super::`
and `self::` path (one-level `{..}` groups included) is resolved to the file that defines it, and a
cycle among the files of one module fails with the files named in order. A file's inline `mod tests`
block and comments are skipped like the test files. KNOWN_FILE_CYCLES lists the circles that are still
to be taken apart (issue 34): one of them that grows, or one that is gone and still listed, fails too.

Layers, lowest first; a module may import from any earlier layer and from modules of its own layer only
when listed in SAME_LAYER_OK (one direction)."""
import re
import sys
from pathlib import Path

LAYERS = [
    ["alloc", "logging", "runtime_libs", "domain", "calendar", "clock", "schedule", "out", "ml", "exec"],
    ["store", "features", "onnx"],
    ["env", "models", "feed"],
    ["config"],
    ["data", "policy", "control", "alpaca", "alerts"],
    ["fuzzing"],
    ["risk", "rl", "lstm", "metrics"],
    ["contract"],
    ["oms"],
    ["broker"],
    ["engine"],
    ["live"],
    ["backtest"],
    ["retrain"],
    ["training"],
    ["tune"],
    ["web"],
    ["telegram"],
    ["daemon", "bench"],
    ["cli"],
]

# (lower, upper): `upper` may use `lower` although both sit in one layer.
SAME_LAYER_OK = set()

SRC = Path(__file__).resolve().parent.parent / "src"
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
USE_GROUP = re.compile(r"\buse\s+crate::\{([^;]*)\}", re.S)


# Circles between files that are known and still to be taken apart (issue 34), each as the set of its
# files (relative to the repository). Remove an entry when its circle is gone; never add one.
KNOWN_FILE_CYCLES: list[set[str]] = []

def module_of(path: Path) -> str | None:
    rel = path.relative_to(SRC)
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


PATH_ANY = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)+)")
GROUP_ANY = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)*)::\{([^{};]*)\}", re.S)
LINE_COMMENT = re.compile(r"//[^\n]*")
INLINE_TESTS = re.compile(r"#\[cfg\(test\)\]\s*mod\s+tests\s*\{")


def is_test_file(path: Path) -> bool:
    """A file of src/ that holds only tests, by the crate's one naming pattern: a module's `tests.rs`, any
    file under a `tests/` folder (`engine/tests/mod.rs`, `engine/tests/money.rs`), and the GPU tests'
    `gpu_tests.rs` (the name `make test-gpu` filters on)."""
    rel = path.relative_to(SRC).parts
    return path.name in ("tests.rs", "gpu_tests.rs") or "tests" in rel[:-1]


def file_module(path: Path) -> tuple[str, ...]:
    """The module path a file defines: `daemon/mod.rs` -> (daemon,), `daemon/bars/x.rs` -> (daemon, bars, x)."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    return tuple(parts)


def file_refs(text: str, here: tuple[str, ...]):
    """Absolute module paths (as tuples) of every `crate::`/`super::`/`self::` path in `text`."""
    text = LINE_COMMENT.sub("", text)
    while m := INLINE_TESTS.search(text):
        depth, end = 1, m.end()
        while depth and end < len(text):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        text = text[: m.start()] + text[end:]

    def base(root: str, rest: list[str]) -> list[str]:
        b = [] if root == "crate" else list(here) if root == "self" else list(here[:-1])
        while rest and rest[0] == "super":
            b, rest = b[:-1], rest[1:]
        return b + rest

    for m in PATH_ANY.finditer(text):
        yield tuple(base(m.group(1), m.group(2).split("::")[1:]))
    for m in GROUP_ANY.finditer(text):
        prefix = base(m.group(1), [p for p in m.group(2).split("::") if p])
        for item in m.group(3).split(","):
            name = item.strip().split("::")[0].strip()
            if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name != "self":
                yield tuple(prefix + [name])


def file_cycles() -> tuple[list[str], int]:
    """One line per circle of imports among the files of one top-level module that is not a known one (or
    a known one that is gone), and how many known circles remain."""
    files = {
        file_module(f): f
        for f in sorted(SRC.rglob("*.rs"))
        if len(f.relative_to(SRC).parts) > 1 and not is_test_file(f)
    }
    edges: dict[tuple, set[tuple]] = {n: set() for n in files}
    for node, f in files.items():
        for target in file_refs(f.read_text(), node):
            owner = next((target[:k] for k in range(len(target), 0, -1) if target[:k] in files), None)
            if owner is not None and owner != node and owner[0] == node[0]:
                edges[node].add(owner)
    # Tarjan's strongly connected components; each component of two or more files holds a cycle.
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    comps: list[list] = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    out = []
    known = 0
    seen = []
    for comp in comps:
        if len(comp) < 2:
            continue
        members = set(comp)
        names_of = {str(files[n].relative_to(SRC.parent)) for n in members}
        seen.append(names_of)
        if names_of in KNOWN_FILE_CYCLES:
            known += 1
            continue
        start = min(comp)
        # the shortest way back to `start` inside the component names one concrete cycle
        prev = {start: None}
        queue = [start]
        found = None
        while queue and found is None:
            v = queue.pop(0)
            for w in sorted(edges[v]):
                if w == start:
                    found = v
                    break
                if w in members and w not in prev:
                    prev[w] = v
                    queue.append(w)
        path = []
        v = found
        while v is not None:
            path.append(v)
            v = prev[v]
        path.reverse()
        names = [str(files[n].relative_to(SRC.parent)) for n in path + [start]]
        rest = sorted(str(files[n].relative_to(SRC.parent)) for n in members - set(path))
        extra = f" (its circle also takes in {', '.join(rest)})" if rest else ""
        out.append(f"import cycle between files of `{start[0]}`: {' -> '.join(names)}{extra}")
    for k in KNOWN_FILE_CYCLES:
        if k not in seen:
            out.append(
                f"known import cycle {', '.join(sorted(k))} is no longer one as listed: remove (or correct) its entry in KNOWN_FILE_CYCLES"
            )
    return sorted(out), known


def main() -> int:
    layer = {m: i for i, mods in enumerate(LAYERS) for m in mods}
    graph: dict[str, set[str]] = {}
    errors = []
    for f in sorted(SRC.rglob("*.rs")):
        src_mod = module_of(f)
        if src_mod is None or is_test_file(f):
            continue
        if src_mod not in layer:
            errors.append(f"{f.relative_to(SRC.parent)}: module `{src_mod}` is in no layer: add it to LAYERS in {Path(__file__).name}")
            continue
        for line, dst in refs(f.read_text()):
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
    cycles, known = file_cycles()
    for c in cycles:
        print(c)
    if errors:
        print(f"{len(set(errors))} layering violation(s): a module may use only modules of lower layers (scripts/check-imports.py)")
    if cycles:
        print(
            f"{len(cycles)} import cycle problem(s) between files of one module: move the part both files need into a file of its own that both use (scripts/check-imports.py)"
        )
    if errors or cycles:
        return 1
    print(f"module layering: {sum(len(v) for v in graph.values())} module edges, no upward import, no cycle between modules, no import cycle between files ({known} known, listed in KNOWN_FILE_CYCLES)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
