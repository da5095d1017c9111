//! What a process loads on a CUDA device once and then shares: the device's context and each compiled
//! source's module, as candle's device keeps its loaded functions. A search builds an env and a trainer
//! per trial (64 of each for a GPU population); each asks for its modules, and only the first request for
//! a (device, source) pair loads one. The cache is generic over what it holds and how it is loaded, so
//! that the sharing is checked on the CPU with a loader that counts.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// Values loaded at most once per key (a failed load is not kept: the next request tries again).
pub(super) struct LoadOnce<K, V> {
    loaded: Mutex<BTreeMap<K, V>>,
}

impl<K: Ord + Clone, V: Clone> LoadOnce<K, V> {
    pub(super) const fn new() -> Self {
        LoadOnce { loaded: Mutex::new(BTreeMap::new()) }
    }

    /// The value under `key`, loaded by `load` if it is the first request. Requests for the same key wait
    /// for the first one's load (the lock is held while loading: loads are rare, a few per process).
    pub(super) fn get_or_load<E>(&self, key: K, load: impl FnOnce() -> Result<V, E>) -> Result<V, E> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = loaded.get(&key) {
            return Ok(v.clone());
        }
        let v = load()?;
        loaded.insert(key, v.clone());
        Ok(v)
    }

    /// How many values are held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Ord + Clone, V: Clone> Default for LoadOnce<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

/// A module's key: the CUDA device's ordinal and a hash of the source (with its name).
pub(super) type ModuleKey = (usize, u64);

/// The key of source `source` (named `name`) on CUDA device `ordinal`.
pub(super) fn module_key(ordinal: usize, name: &str, source: &str) -> ModuleKey {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (name, source).hash(&mut h);
    (ordinal, h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const ENV: (&str, &str) = ("env_step.cu", "extern \"C\" __global__ void tb_env_step() {}");
    const GAE: (&str, &str) = ("gae.cu", "extern \"C\" __global__ void tb_gae() {}");

    /// A population of `trials` on `devices` GPUs (trial i on device i % devices), each trial's env and
    /// trainer built on a thread of its own and asking for its module: the loads per source.
    fn loads_for_a_population(trials: usize, devices: usize) -> (usize, usize) {
        let cache: Arc<LoadOnce<ModuleKey, Arc<String>>> = Arc::new(LoadOnce::new());
        let counts = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let threads: Vec<_> = (0..trials)
            .flat_map(|t| [(t, 0), (t, 1)])
            .map(|(t, which)| {
                let (cache, counts) = (cache.clone(), counts.clone());
                std::thread::spawn(move || {
                    let (name, source) = [ENV, GAE][which];
                    let ordinal = t % devices;
                    let got = cache
                        .get_or_load(module_key(ordinal, name, source), || {
                            counts[which].fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(2));
                            Ok::<_, std::convert::Infallible>(Arc::new(format!("{name} on {ordinal}")))
                        })
                        .unwrap();
                    assert_eq!(*got, format!("{name} on {ordinal}"), "another source's or device's module came back");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(cache.len(), 2 * devices);
        (counts[0].load(Ordering::SeqCst), counts[1].load(Ordering::SeqCst))
    }

    /// 64 envs and 64 trainers on one GPU load each source once; on two GPUs, once per GPU.
    #[test]
    fn a_population_loads_each_source_once_per_device() {
        assert_eq!(loads_for_a_population(64, 1), (1, 1));
        assert_eq!(loads_for_a_population(64, 2), (2, 2));
    }

    #[test]
    fn a_failed_load_is_tried_again_and_keys_differ_by_device_name_and_source() {
        let cache: LoadOnce<ModuleKey, u32> = LoadOnce::new();
        let key = module_key(0, ENV.0, ENV.1);
        assert_eq!(cache.get_or_load(key, || Err("no driver")), Err("no driver"));
        assert!(cache.is_empty());
        assert_eq!(cache.get_or_load(key, || Ok::<_, &str>(7)), Ok(7));
        assert_eq!(cache.get_or_load(key, || Ok::<_, &str>(8)), Ok(7), "loaded twice");
        assert_ne!(key, module_key(1, ENV.0, ENV.1));
        assert_ne!(key, module_key(0, GAE.0, ENV.1));
        assert_ne!(key, module_key(0, ENV.0, GAE.1));
    }
}
