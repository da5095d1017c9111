//! The process allocator: jemalloc, the binary's global allocator. Built with unprefixed symbols, it is
//! also the `malloc` that libtorch and ONNX Runtime allocate through.

/// For training processes: keep freed pages mapped instead of handing them back to the kernel.
///
/// libtorch's oneDNN LSTM allocates and frees workspaces of tens of MB on every batch. Returned to the
/// kernel at once (glibc unmaps allocations above 32 MB; jemalloc purges those above 8 MB immediately),
/// each is faulted in and zeroed again on the next batch: `perf` put 40 % of `tradebot bench lstm`'s CPU
/// time in the kernel's page-fault path. With purging off the same bench ran 1.9× faster. A training
/// process exits when it is done, so holding its peak for its lifetime costs nothing later; the daemon
/// does not call this.
pub fn keep_freed_pages() {
    let controls: [&[u8]; 4] = [
        b"arenas.dirty_decay_ms\0",
        b"arenas.muzzy_decay_ms\0",
        b"arena.4096.dirty_decay_ms\0", // 4096 = MALLCTL_ARENAS_ALL: the arenas that exist already
        b"arena.4096.muzzy_decay_ms\0",
    ];
    for name in controls {
        // SAFETY: each name is a NUL-terminated jemalloc control whose value type is `ssize_t`.
        if let Err(e) = unsafe { tikv_jemalloc_ctl::raw::write(name, -1isize) } {
            log::debug!("jemalloc {}: {e}", String::from_utf8_lossy(&name[..name.len() - 1]));
        }
    }
}

/// The decay time in ms that new arenas get (-1: never purge), for tests.
pub fn dirty_decay_ms() -> Option<isize> {
    // SAFETY: a NUL-terminated jemalloc control whose value type is `ssize_t`.
    unsafe { tikv_jemalloc_ctl::raw::read::<isize>(b"arenas.dirty_decay_ms\0") }.ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn purging_can_be_turned_off() {
        super::keep_freed_pages();
        assert_eq!(super::dirty_decay_ms(), Some(-1));
    }
}
