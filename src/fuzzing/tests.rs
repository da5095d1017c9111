//! The fuzz seeds as a regression test (stable Rust, no libFuzzer): every committed seed of each target,
//! then a deterministic mutation run (fixed seed: bit flips, byte changes, insertions, deletions,
//! truncations, splices of two inputs). A panic fails the test with the input that caused it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

/// Mutated inputs per target.
const MUTATIONS: usize = 50_000;

/// The committed seed inputs of a target: the wire fixtures the parser tests use (real-shaped payloads) and
/// the shipped configs, plus `fuzz/seeds/<target>` (edge cases). All are tracked by git; `fuzz/corpus` is
/// cargo-fuzz's own working directory and stays out of the repository.
fn seed_dirs(target: &str) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let fixtures = root.join("tests/fixtures/alpaca");
    let mut dirs = match target {
        "frames" => vec![fixtures.join("stream"), fixtures.join("updates")],
        "rest" => vec![fixtures.join("rest")],
        "config" => vec![root.join("config")],
        _ => Vec::new(),
    };
    dirs.push(root.join("fuzz/seeds").join(target));
    dirs
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in seed_dirs(target) {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e} (committed seeds)", dir.display()));
        files.extend(entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
    }
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(inputs.len() >= 5, "{target}: only {} seed inputs", inputs.len());
    inputs
}

/// xorshift64*: the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: &[&[u8]] =
    &[b"null", b"-1", b"1e400", b"\"\"", b"[]", b"{}", b"NaN", b"\xff\xfe", b"\"T\"", b"9999999999999999999999999999"];

fn mutate(rng: &mut Rng, inputs: &[Vec<u8>]) -> Vec<u8> {
    let mut v = inputs[rng.below(inputs.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        let last = v.len().saturating_sub(1);
        match rng.below(7) {
            0 if !v.is_empty() => v[at.min(last)] ^= 1 << rng.below(8),
            1 if !v.is_empty() => v[at.min(last)] = rng.next() as u8,
            2 => v.insert(at, rng.next() as u8),
            3 if !v.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at.min(v.len() - 1)..end);
            }
            4 => v.truncate(at),
            5 => {
                let other = &inputs[rng.below(inputs.len())];
                let from = rng.below(other.len() + 1);
                v.splice(at..at, other[from..].iter().copied().take(64));
            }
            _ => {
                let tok = INTERESTING[rng.below(INTERESTING.len())];
                v.splice(at..at, tok.iter().copied());
            }
        }
    }
    v
}

fn run(target: &str, f: fn(&[u8])) {
    let inputs = corpus(target);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ target.len() as u64);
    let mutated = (0..MUTATIONS).map(|_| mutate(&mut rng, &inputs));
    for (i, input) in inputs.clone().into_iter().chain(mutated).enumerate() {
        if catch_unwind(AssertUnwindSafe(|| f(&input))).is_err() {
            panic!(
                "fuzz target {target} panicked on input {i} ({} bytes): {:?}",
                input.len(),
                String::from_utf8_lossy(&input)
            );
        }
    }
}

#[test]
fn frames_corpus_and_mutations_never_panic() {
    run("frames", super::frames);
}

#[test]
fn rest_corpus_and_mutations_never_panic() {
    run("rest", super::rest);
}

#[test]
fn config_corpus_and_mutations_never_panic() {
    run("config", super::config);
}
