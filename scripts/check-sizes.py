#!/usr/bin/env python3
"""Checks the size of the crate's source: no file of src/ or tests/ over MAX_FILE lines (test files
included: an integration test binary that grows becomes a folder, `tests/<name>/main.rs` declaring one file
per topic, as tests/risk/ is), and no non-test function of src/ over MAX_FN lines (from its `fn` line to its
closing brace). Test code is skipped for the function check: `tests.rs` files, every file under a `tests/`
folder, files declared as `#[cfg(test)] mod x;` (by name or by `#[path]`), inline `#[cfg(test)] mod x { .. }`
blocks and `#[test]` functions. Prints one line per offender, biggest first, and fails when there is one.
`--top N` lists the N longest functions as well.

Test files have one naming pattern (the crate docs in src/lib.rs): a module's unit tests are its `tests`
module, inline or in `tests.rs` beside the module (`<module>/tests.rs`), or, by topic, `<module>/tests/mod.rs`
declaring one file per topic (`<module>/tests/money.rs`). A file named `*_tests.rs` fails, so the pattern
stays one; the exception is `gpu_tests` (src/gpu_tests.rs and the inline `mod gpu_tests` blocks), whose
name is the filter `make test-gpu` runs (`GPU_TEST_FILTER := gpu_tests::` in the Makefile).

KNOWN_LONG_FNS lists the long functions that are still to be split (in files other changes own): one that
is gone and still listed fails too, so that the list only shrinks."""
import re
import sys
from pathlib import Path

MAX_FILE = 500
MAX_FN = 80

# (file, function) still to be split (issue 34). Remove an entry when its function is short; never add one.
KNOWN_LONG_FNS: set[tuple[str, str]] = set()

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = SRC.parent
# The integration tests: the file rule only (all of it is test code).
TESTS = ROOT / "tests"

CFG_TEST_MOD = re.compile(
    r"#\[cfg\((?:test|all\(test[^\]]*\))\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_0-9]+)\s*([;{])"
)
PATH_ATTR = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
# The one test file named `*_tests.rs` that may be: its name is `make test-gpu`'s filter.
GPU_TESTS = "gpu_tests.rs"
FN = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")
TEST_ATTR = re.compile(r"#\[(?:tokio::)?test\b")


def blank(text: str) -> str:
    """`text` with comments, string and char literals replaced by spaces (newlines kept), so that the braces
    left are the code's."""
    out = list(text)
    i, n = 0, len(text)

    def wipe(a: int, b: int):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif m := re.match(r'b?r(#*)"', text[i : i + 260]) if c in "rb" and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")) else None:
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            wipe(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif c == "'":
            # a char literal ('x', '\n', '\u{..}', '{') or a lifetime ('a)
            m = re.match(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i : i + 12])
            if m:
                wipe(i, i + m.end())
                i += m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def block_end(code: str, open_at: int) -> int:
    """The index just past the brace closing the one at `open_at`."""
    depth, j = 0, open_at
    while j < len(code):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(code)


def named_as_test(f: Path) -> bool:
    """A test file by name: a module's `tests.rs`, any file under a `tests/` folder of src/, `gpu_tests.rs`."""
    return f.name in ("tests.rs", GPU_TESTS) or "tests" in f.relative_to(SRC).parts[:-1]


def misnamed_tests() -> list[str]:
    """One line per file named `*_tests.rs` (other than `gpu_tests.rs`), the old second naming pattern, with
    where it goes instead."""
    out = []
    for f in sorted(SRC.rglob("*_tests.rs")):
        if f.name == GPU_TESTS:
            continue
        topic = f.name[: -len("_tests.rs")]
        own = (f.parent / topic / "tests.rs").relative_to(ROOT)
        folder = (f.parent / "tests").relative_to(ROOT)
        out.append(
            f"{f.relative_to(ROOT)}: a test file is not named `*_tests.rs`: make it its module's `tests` "
            f"(`{own}`), or the topic `{folder}/{topic}.rs` declared by `{folder}/mod.rs`"
        )
    return out


def test_files() -> set[Path]:
    """Files that are only compiled for tests."""
    found = {f for f in SRC.rglob("*.rs") if named_as_test(f)}
    for f in SRC.rglob("*.rs"):
        text = f.read_text()
        here = f.parent if f.name in ("mod.rs", "lib.rs", "main.rs") else f.parent / f.stem
        for m in CFG_TEST_MOD.finditer(text):
            if m.group(2) != ";":
                continue
            attrs = text[m.start() : m.end()]
            p = PATH_ATTR.search(attrs)
            if p:
                found.add((f.parent / p.group(1)).resolve())
            else:
                for cand in (here / f"{m.group(1)}.rs", here / m.group(1) / "mod.rs"):
                    if cand.exists():
                        found.add(cand.resolve())
    # everything under a test-only module's folder is test-only too
    more = set()
    for t in found:
        if t.name == "mod.rs":
            more |= {x.resolve() for x in t.parent.rglob("*.rs")}
        else:
            d = t.parent / t.stem
            if d.is_dir():
                more |= {x.resolve() for x in d.rglob("*.rs")}
    return {p.resolve() for p in found | more}


def long_fns(path: Path):
    """(lines, line number, name) of every non-test function of `path`."""
    text = path.read_text()
    code = blank(text)
    skip: list[tuple[int, int]] = []
    for m in CFG_TEST_MOD.finditer(code):
        if m.group(2) == "{":
            skip.append((m.start(), block_end(code, m.end() - 1)))
    for m in FN.finditer(code):
        if any(a <= m.start() < b for a, b in skip):
            continue
        # the signature runs to the body's `{` or a `;` (a trait's declared method)
        j = m.end()
        depth = 0
        while j < len(code):
            ch = code[j]
            if ch in "(<[":
                depth += 1
            elif ch in ")>]":
                depth -= 1
            elif depth <= 0 and ch in "{;":
                break
            j += 1
        if j >= len(code) or code[j] == ";":
            continue
        # `->` has a `>` that is no bracket: recount the signature's brackets without arrows
        sig = code[m.end() : j].replace("->", "  ")
        if sig.count("(") != sig.count(")"):
            continue
        head = code[max(0, m.start() - 400) : m.start()]
        prev = head[head.rfind(";") + 1 :] if ";" in head else head
        prev = prev[prev.rfind("}") + 1 :] if "}" in prev else prev
        if TEST_ATTR.search(prev):
            continue
        end = block_end(code, j)
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, end - 1) + 1
        yield last - first + 1, first, m.group(1)


def main() -> int:
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 0
    tests = test_files()
    files, fns = [], []
    for f in sorted(TESTS.rglob("*.rs")):
        n = f.read_text().count("\n")
        if n > MAX_FILE:
            files.append((n, f.relative_to(ROOT)))
    for f in sorted(SRC.rglob("*.rs")):
        rel = f.relative_to(ROOT)
        n = f.read_text().count("\n")
        if n > MAX_FILE:
            files.append((n, rel))
        if f.resolve() in tests:
            continue
        for lines, line, name in long_fns(f):
            fns.append((lines, f"{rel}:{line}", name, str(rel)))
    fns.sort(reverse=True)
    misnamed = misnamed_tests()
    for line in misnamed:
        print(line)
    for n, rel in sorted(files, reverse=True):
        print(f"{rel}: {n} lines (at most {MAX_FILE}): split it by concern")
    long = [x for x in fns if x[0] > MAX_FN]
    known = [x for x in long if (x[3], x[2]) in KNOWN_LONG_FNS]
    over = [x for x in long if (x[3], x[2]) not in KNOWN_LONG_FNS]
    for lines, at, name, _ in over:
        print(f"{at}: fn {name} is {lines} lines (at most {MAX_FN}): split it")
    gone = sorted(KNOWN_LONG_FNS - {(x[3], x[2]) for x in known})
    for rel, name in gone:
        print(f"{rel}: fn {name} is no longer over {MAX_FN} lines (or gone): remove it from KNOWN_LONG_FNS")
    if top:
        print(f"the {top} longest non-test functions:")
        for lines, at, name, _ in fns[:top]:
            print(f"  {lines:4} {at} {name}")
    if files or over or gone or misnamed:
        print(
            f"{len(files)} file(s) over {MAX_FILE} lines, {len(over)} function(s) over {MAX_FN} lines, "
            f"{len(gone)} stale KNOWN_LONG_FNS entr{'y' if len(gone) == 1 else 'ies'}, "
            f"{len(misnamed)} test file(s) named `*_tests.rs` (scripts/check-sizes.py)",
            file=sys.stderr,
        )
        return 1
    print(
        f"sizes: no file of src/ or tests/ over {MAX_FILE} lines, no non-test function over {MAX_FN} lines "
        f"({len(known)} known, listed in KNOWN_LONG_FNS), no test file named `*_tests.rs` but {GPU_TESTS}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
