//! The process allocator: jemalloc, the binary's global allocator. Built with unprefixed symbols, it is
//! also the `malloc` that libtorch and ONNX Runtime allocate through.
// jemalloc's control interface (`mallctl`) is a raw C API: names and value types are checked by hand below.
#![allow(unsafe_code)]

/// For training processes: keep freed pages mapped instead of handing them back to the kernel.
///
/// libtorch's oneDNN LSTM allocates and frees workspaces of tens of MB on every batch. Returned to the
/// kernel at once (glibc unmaps allocations above 32 MB; jemalloc purges those above 8 MB immediately),
/// each is faulted in and zeroed again on the next batch: `perf` put 40 % of `tradebot bench lstm`'s CPU
/// time in the kernel's page-fault path. With purging off the same bench ran about 2× faster. A training
/// process exits when it is done, so holding its peak for its lifetime costs nothing later; the daemon
/// does not call this.
///
/// Sets the default for arenas created later (the one for allocations above 8 MB among them, made on the
/// first such allocation) and then each arena that exists already: jemalloc has no "all arenas" index for
/// these controls.
pub fn keep_freed_pages() {
    let mut failed = Vec::new();
    for kind in ["dirty", "muzzy"] {
        let default = format!("arenas.{kind}_decay_ms\0");
        if let Err(e) = set_decay_ms(&default, -1) {
            failed.push(format!("{}: {e}", default.trim_end_matches('\0')));
        }
    }
    let narenas = tikv_jemalloc_ctl::arenas::narenas::read().unwrap_or(0);
    for i in 0..narenas {
        for kind in ["dirty", "muzzy"] {
            // An index not yet initialised answers EFAULT; it takes the new default when it is made.
            let _ = set_decay_ms(&format!("arena.{i}.{kind}_decay_ms\0"), -1);
        }
    }
    if !failed.is_empty() {
        // Training still works, only slower: say so rather than leave a 2x slowdown unexplained.
        log::warn!("jemalloc: {}; freed memory goes back to the kernel and training may run slower", failed.join(", "));
    }
}

fn set_decay_ms(name: &str, ms: isize) -> tikv_jemalloc_ctl::Result<()> {
    // SAFETY: `name` is a NUL-terminated jemalloc decay control, whose value type is `ssize_t`.
    unsafe { tikv_jemalloc_ctl::raw::write(name.as_bytes(), ms) }
}

#[cfg(test)]
mod tests {
    /// A jemalloc decay control in ms (-1: never purge).
    fn decay_ms(name: &[u8]) -> Option<isize> {
        // SAFETY: a NUL-terminated jemalloc control whose value type is `ssize_t`.
        unsafe { tikv_jemalloc_ctl::raw::read::<isize>(name) }.ok()
    }

    #[test]
    fn purging_can_be_turned_off() {
        // Arena 0 exists from the first allocation: it must change too, not only the arenas made later.
        assert_ne!(decay_ms(b"arena.0.dirty_decay_ms\0"), Some(-1), "jemalloc purges by default");
        super::keep_freed_pages();
        assert_eq!(decay_ms(b"arenas.dirty_decay_ms\0"), Some(-1));
        assert_eq!(decay_ms(b"arenas.muzzy_decay_ms\0"), Some(-1));
        assert_eq!(decay_ms(b"arena.0.dirty_decay_ms\0"), Some(-1));
        assert_eq!(decay_ms(b"arena.0.muzzy_decay_ms\0"), Some(-1));
    }
}
