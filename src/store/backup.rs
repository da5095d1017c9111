//! Backups of the store: a consistent copy of every tree (`Store::backup`, taken by the daemon before
//! each retrain and by `tradebot store backup`), put back by `restore`, which keeps the replaced
//! database beside it; and `reseal`, which accepts a database as it is.
//!
//! File format (gzip): `MAGIC`, a JSON header (`Header`), then per tree `T name`, its records
//! `E key value` (lengths u32 LE), and `Z` with the record count (u64 LE), then the CRC-32 (u32 LE) of
//! everything before it. A file that does not end in a matching trailer is refused before anything is touched.

use super::sentinel::{Mark, Sentinel};
use super::{DB_DIR, Store, StoreError, TreeName, guard, lock_seal, open_db, restore_kill};
use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

pub use super::BACKUP_DIR;
use super::Trees;
const MAGIC: &[u8] = b"TBBACKUP1\n";
/// Backups kept by `prune` (the daemon's, before each retrain).
pub const KEEP: usize = 4;

/// The metadata a backup file starts with (after its magic line), read back by `restore` and `backups`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Header {
    /// When the backup was taken (UTC).
    pub created: DateTime<Utc>,
    /// The critical-write sequence the copy was taken at.
    pub seq: u64,
    /// The version of tradebot that wrote the backup (`CARGO_PKG_VERSION`).
    pub tradebot: String,
}

/// What a backup or restore did.
#[derive(Debug)]
pub struct Summary {
    /// The backup file written or restored from.
    pub path: PathBuf,
    /// That backup's header.
    pub header: Header,
    /// How many trees were copied.
    pub trees: usize,
    /// How many records were copied, over all trees.
    pub records: u64,
    /// `restore`: how the kill switch it brought back differs from the replaced database's, and which
    /// was kept (`restore_kill`); `None` when they agree.
    pub kill_switch: Option<String>,
}

impl Store {
    /// Writes a backup of every tree to `<state_dir>/backups`. Critical writes wait while it runs, so
    /// the orders, fills and kill-switch records in it are one consistent moment.
    pub fn backup(&self) -> Result<Summary, StoreError> {
        let db = self.db.sled("a backup")?;
        let dir = self.dir.join(BACKUP_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Dir { dir: dir.clone(), source })?;
        let seal = lock_seal(&self.seal);
        let header = Header { created: Utc::now(), seq: seal.mark.seq, tradebot: env!("CARGO_PKG_VERSION").into() };
        let name = format!("store-{}-seq{}.tbk", header.created.format("%Y%m%dT%H%M%S%.3fZ"), header.seq);
        let path = dir.join(name);
        let tmp = path.with_extension("tmp");
        let fail = |e: std::io::Error| StoreError::Backup { path: path.clone(), detail: e.to_string() };
        let file = std::fs::File::create(&tmp).map_err(fail)?;
        let mut w = Crc(GzEncoder::new(BufWriter::new(file), Compression::fast()), crc32fast::Hasher::new());
        w.write_all(MAGIC).map_err(fail)?;
        let hdr = serde_json::to_vec(&header)
            .map_err(|e| StoreError::Backup { path: path.clone(), detail: e.to_string() })?;
        put(&mut w, &hdr).map_err(fail)?;
        let (mut trees, mut records) = (0, 0u64);
        // The critical trees (and the default tree with the write sequence) first, under the sentinel's
        // lock; the rest (bars, decisions: recomputable) after it, so trading waits only for the former.
        let mut names = db.tree_names();
        let critical = |n: &sled::IVec| {
            TreeName::ALL.iter().any(|t| t.durable() && t.as_str().as_bytes() == n.as_ref())
                || n.as_ref() == b"__sled__default"
        };
        names.sort_by_key(|n| !critical(n));
        let mut seal = Some(seal);
        for name in names {
            if !critical(&name) {
                seal = None;
            }
            let tree = db.open_tree(&name)?;
            w.write_all(b"T").map_err(fail)?;
            put(&mut w, &name).map_err(fail)?;
            trees += 1;
            for kv in tree.iter() {
                let (k, v) = kv?;
                w.write_all(b"E").map_err(fail)?;
                put(&mut w, &k).map_err(fail)?;
                put(&mut w, &v).map_err(fail)?;
                records += 1;
            }
        }
        drop(seal);
        w.write_all(b"Z").map_err(fail)?;
        w.write_all(&records.to_le_bytes()).map_err(fail)?;
        let crc = w.1.clone().finalize();
        let mut gz = w.0;
        gz.write_all(&crc.to_le_bytes()).map_err(fail)?;
        let file = gz.finish().map_err(fail)?.into_inner().map_err(|e| fail(e.into_error()))?;
        file.sync_all().map_err(fail)?;
        std::fs::rename(&tmp, &path).map_err(fail)?;
        Ok(Summary { path, header, trees, records, kill_switch: None })
    }
}

/// Removes all but the newest `keep` backups under `state_dir`; returns how many were removed.
pub fn prune(state_dir: &Path, keep: usize) -> std::io::Result<usize> {
    let mut all = list(state_dir)?;
    let n = all.len().saturating_sub(keep);
    for p in all.drain(..n) {
        std::fs::remove_file(p)?;
    }
    Ok(n)
}

/// The backups under `state_dir`, oldest first (names sort by time).
pub fn list(state_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = state_dir.join(BACKUP_DIR);
    let mut out = Vec::new();
    match std::fs::read_dir(&dir) {
        Ok(rd) => {
            for e in rd {
                let p = e?.path();
                if p.extension().is_some_and(|x| x == "tbk") {
                    out.push(p);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    out.sort();
    Ok(out)
}

/// Reads and verifies a backup file completely.
pub fn read(path: &Path) -> Result<(Header, Trees), StoreError> {
    let bad = |detail: String| StoreError::Backup { path: path.to_path_buf(), detail };
    let file = std::fs::File::open(path).map_err(|e| bad(format!("cannot open: {e}")))?;
    let mut r = Crc(GzDecoder::new(BufReader::new(file)), crc32fast::Hasher::new());
    let truncated = |e: std::io::Error| bad(format!("truncated or not a tradebot backup ({e})"));
    let mut magic = vec![0u8; MAGIC.len()];
    r.read_exact(&mut magic).map_err(truncated)?;
    if magic != MAGIC {
        return Err(bad("not a tradebot store backup".into()));
    }
    let header: Header =
        serde_json::from_slice(&get(&mut r).map_err(truncated)?).map_err(|e| bad(format!("bad header: {e}")))?;
    let mut trees: Trees = Vec::new();
    let mut records = 0u64;
    loop {
        let mut tag = [0u8; 1];
        r.read_exact(&mut tag).map_err(truncated)?;
        match &tag {
            b"T" => trees.push((get(&mut r).map_err(truncated)?, Vec::new())),
            b"E" => {
                let k = get(&mut r).map_err(truncated)?;
                let v = get(&mut r).map_err(truncated)?;
                let t = trees.last_mut().ok_or_else(|| bad("a record before any tree".into()))?;
                t.1.push((k, v));
                records += 1;
            }
            b"Z" => break,
            _ => return Err(bad(format!("unknown section tag {}", tag[0]))),
        }
    }
    let mut n = [0u8; 8];
    r.read_exact(&mut n).map_err(truncated)?;
    let crc = r.1.clone().finalize();
    if u64::from_le_bytes(n) != records {
        return Err(bad(format!("says {} records, holds {records}", u64::from_le_bytes(n))));
    }
    let mut stored = [0u8; 4];
    r.0.read_exact(&mut stored).map_err(truncated)?;
    if u32::from_le_bytes(stored) != crc {
        return Err(bad("checksum mismatch: the file is damaged".into()));
    }
    // Reading to the end makes gzip check its own trailer too.
    let mut rest = Vec::new();
    r.0.read_to_end(&mut rest).map_err(truncated)?;
    if !rest.is_empty() {
        return Err(bad(format!("{} bytes after the trailer", rest.len())));
    }
    Ok((header, trees))
}

/// Puts `backup` back as the store under `state_dir` (no tradebot may hold it). The database it
/// replaces is kept as `db.replaced-<time>` (with its sentinel), never deleted.
pub fn restore(state_dir: &Path, backup: &Path) -> Result<Summary, StoreError> {
    let _lock = super::lock_dir(state_dir)?;
    let (header, trees) = read(backup)?;
    let replaced_kill = restore_kill::read_current(state_dir);
    let (keep_kill, kill_switch) = restore_kill::decide(&restore_kill::in_backup(&trees), &replaced_kill);
    let stamp = Utc::now().format("%Y%m%dT%H%M%SZ");
    let db_path = state_dir.join(DB_DIR);
    let io = |dir: &Path| {
        let dir = dir.to_path_buf();
        move |source| StoreError::Dir { dir, source }
    };
    if db_path.exists() {
        let aside = unused(state_dir, &format!("{DB_DIR}.replaced-{stamp}"));
        std::fs::rename(&db_path, &aside).map_err(io(&aside))?;
    }
    let sentinel = Sentinel::path(state_dir);
    if sentinel.exists() {
        let aside = unused(state_dir, &format!("{}.replaced-{stamp}", super::sentinel::SENTINEL_FILE));
        std::fs::rename(&sentinel, &aside).map_err(io(&aside))?;
    }
    let records = trees.iter().map(|t| t.1.len() as u64).sum();
    let n = trees.len();
    guard::guarded(state_dir, || {
        let db = open_db(&db_path)?;
        for (name, entries) in trees {
            let tree = db.open_tree(name)?;
            for (k, v) in entries {
                tree.insert(k, v)?;
            }
        }
        if let Some(k) = &keep_kill {
            db.open_tree(TreeName::Kv.as_str())?.insert(restore_kill::KILL_SWITCH_KEY, k.as_slice())?;
        }
        db.flush()?;
        let seq = super::db_seq(&db)?;
        Sentinel::create(state_dir, Mark { seq, last: Default::default() })
            .map_err(|source| StoreError::Sentinel { path: Sentinel::path(state_dir), source })?;
        Ok(())
    })?;
    if let Some(k) = &kill_switch {
        log::warn!("store restore: {k}");
    }
    Ok(Summary { path: backup.to_path_buf(), header, trees: n, records, kill_switch })
}

/// `dir/name`, or `dir/name-2`, `-3`, ... when taken (two restores within one second).
fn unused(dir: &Path, name: &str) -> PathBuf {
    let mut p = dir.join(name);
    let mut n = 1;
    while p.exists() {
        n += 1;
        p = dir.join(format!("{name}-{n}"));
    }
    p
}

/// Accepts the database under `state_dir` as it is: a new sentinel at its current sequence. Returns it.
pub fn reseal(state_dir: &Path) -> Result<u64, StoreError> {
    let _lock = super::lock_dir(state_dir)?;
    super::leftovers::clear_db(&state_dir.join(DB_DIR));
    guard::guarded(state_dir, || {
        let db = open_db(&state_dir.join(DB_DIR))?;
        super::check::scan_all(&db)?;
        let seq = super::db_seq(&db)?;
        Sentinel::create(state_dir, Mark { seq, last: Default::default() })
            .map_err(|source| StoreError::Sentinel { path: Sentinel::path(state_dir), source })?;
        Ok(seq)
    })
}

/// A reader or writer that keeps the CRC-32 of the bytes through it.
struct Crc<T>(T, crc32fast::Hasher);

impl<W: Write> Write for Crc<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.0.write(buf)?;
        self.1.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl<R: Read> Read for Crc<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1.update(&buf[..n]);
        Ok(n)
    }
}

fn put(w: &mut impl Write, b: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(b.len()).map_err(|_| std::io::Error::other("record over 4 GiB"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(b)
}

fn get(r: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut n = [0u8; 4];
    r.read_exact(&mut n)?;
    let len = u32::from_le_bytes(n) as usize;
    if len > 1 << 30 {
        return Err(std::io::Error::other(format!("a record of {len} bytes")));
    }
    let mut b = vec![0u8; len];
    r.read_exact(&mut b)?;
    Ok(b)
}
