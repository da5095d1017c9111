//! The sentinel: a small file beside the database, fsynced on every write of a critical tree, that says
//! how far the database had got. A database found behind it was rolled back (a truncated log, a restored
//! copy, a lost snapshot); one whose latest critical records differ from it was damaged.
//!
//! Layout: two slots of `SLOT` bytes, written alternately (the slot is `seq % 2`), each
//! `MAGIC | payload length (u32 LE) | CRC-32 of the payload (u32 LE) | payload (JSON) | zeros`.
//! A write tears at most one slot; the reader takes the valid slot with the larger sequence.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The sentinel's file name, in the state directory beside the database folder.
pub const SENTINEL_FILE: &str = "db.sentinel";
const SLOT: usize = 4096;
const HEADER: usize = 16;
const MAGIC: &[u8; 8] = b"TBSEAL01";

/// What the sentinel says: the write sequence, and the last write to each critical tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The write sequence: how many writes to critical trees had been sealed (the database's `write_seq`).
    pub seq: u64,
    /// Tree name → its last write: the key (hex) and the CRC-32 of the value written (`None`: removed).
    #[serde(default)]
    pub last: BTreeMap<String, LastWrite>,
}

/// The last write to one critical tree, as the sentinel recorded it, to compare with the database's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastWrite {
    /// The record's key, in lower-case hex.
    pub key: String,
    /// The CRC-32 of the value written; `None` when the write removed the record.
    pub crc: Option<u32>,
}

impl LastWrite {
    /// The record of a write of `value` (`None`: a removal) under `key`.
    pub fn new(key: &[u8], value: Option<&[u8]>) -> LastWrite {
        LastWrite { key: hex(key), crc: value.map(crc32fast::hash) }
    }

    /// The key as bytes; `None` when the stored hex is malformed (a damaged sentinel).
    pub fn key_bytes(&self) -> Option<Vec<u8>> {
        unhex(&self.key)
    }
}

/// What reading the sentinel found.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// No sentinel file (a new store, or one written by a tradebot before sentinels).
    Absent,
    /// A file neither of whose slots is valid.
    Unreadable,
    /// The mark of the valid slot with the larger sequence.
    Mark(Mark),
}

/// The open sentinel file.
pub struct Sentinel {
    /// `None` for a store in memory: the mark is kept, never written.
    file: Option<File>,
    path: PathBuf,
    /// The mark as of the last sealed write (what the file holds, for a store on disk).
    pub mark: Mark,
}

impl Sentinel {
    /// The sentinel file's path for the state directory `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(SENTINEL_FILE)
    }

    /// Reads the sentinel under `dir` without changing it.
    pub fn read(dir: &Path) -> std::io::Result<Found> {
        let path = Sentinel::path(dir);
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut f) => f.read_to_end(&mut bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Absent),
            Err(e) => return Err(e),
        };
        let best = bytes.chunks(SLOT).take(2).filter_map(decode_slot).max_by_key(|m| m.seq);
        Ok(best.map_or(Found::Unreadable, Found::Mark))
    }

    /// Opens (creating) the sentinel under `dir` for writing, starting from `mark`, and writes it.
    pub fn create(dir: &Path, mark: Mark) -> std::io::Result<Sentinel> {
        let path = Sentinel::path(dir);
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        let mut s = Sentinel { file: Some(file), path, mark };
        s.write()?;
        // Both slots agree after a (re)start, so a later torn write falls back to this mark, never to
        // an older one left in the other slot.
        s.write_slot(s.mark.seq.wrapping_add(1) % 2)?;
        if let Ok(d) = File::open(dir) {
            d.sync_all()?;
        }
        Ok(s)
    }

    /// The mark of a store in memory, with no file.
    pub fn in_memory(mark: Mark) -> Sentinel {
        Sentinel { file: None, path: PathBuf::new(), mark }
    }

    /// This sentinel's file (empty for a store in memory).
    pub fn file_path(&self) -> &Path {
        &self.path
    }

    /// Writes the current mark to its slot and waits for the disk.
    pub fn write(&mut self) -> std::io::Result<()> {
        self.write_slot(self.mark.seq % 2)
    }

    fn write_slot(&mut self, slot: u64) -> std::io::Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        let bytes = encode_slot(&self.mark);
        file.write_all_at(&bytes, slot * SLOT as u64)?;
        file.sync_data()
    }
}

fn encode_slot(mark: &Mark) -> Vec<u8> {
    let mut mark = mark.clone();
    let mut payload = serde_json::to_vec(&mark).unwrap_or_default();
    // Over-long keys would not fit: forget those trees' last writes (the sequence still guards them).
    while payload.len() > SLOT - HEADER && !mark.last.is_empty() {
        let longest = mark.last.iter().max_by_key(|(_, w)| w.key.len()).map(|(k, _)| k.clone());
        if let Some(k) = longest {
            mark.last.remove(&k);
        }
        payload = serde_json::to_vec(&mark).unwrap_or_default();
    }
    let mut out = vec![0u8; SLOT];
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    out[12..16].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out[HEADER..HEADER + payload.len()].copy_from_slice(&payload);
    out
}

fn decode_slot(b: &[u8]) -> Option<Mark> {
    if b.len() < HEADER || &b[..8] != MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(b[8..12].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(b[12..16].try_into().ok()?);
    let payload = b.get(HEADER..HEADER + len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    serde_json::from_slice(payload).ok()
}

/// `b` in lower-case hex, two digits a byte (how the sentinel and messages write keys).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(seq: u64) -> Mark {
        let mut last = BTreeMap::new();
        last.insert("orders".to_string(), LastWrite::new(b"tb-abc", Some(b"{\"x\":1}")));
        Mark { seq, last }
    }

    #[test]
    fn the_newer_valid_slot_wins_and_a_torn_slot_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Sentinel::read(dir.path()).unwrap(), Found::Absent);
        let mut s = Sentinel::create(dir.path(), mark(7)).unwrap();
        s.mark = mark(8);
        s.write().unwrap();
        assert_eq!(Sentinel::read(dir.path()).unwrap(), Found::Mark(mark(8)));
        // Tear the slot of seq 8 (slot 0): the reader falls back to seq 7 in slot 1.
        let f = std::fs::OpenOptions::new().write(true).open(Sentinel::path(dir.path())).unwrap();
        f.write_all_at(b"garbage!", 20).unwrap();
        assert_eq!(Sentinel::read(dir.path()).unwrap(), Found::Mark(mark(7)));
        f.write_all_at(&[0u8; 64], SLOT as u64).unwrap();
        assert_eq!(Sentinel::read(dir.path()).unwrap(), Found::Unreadable);
    }

    #[test]
    fn keys_round_trip_through_hex_and_long_keys_are_dropped_not_fatal() {
        let w = LastWrite::new(&[0, 1, 0xfe, 0xff], None);
        assert_eq!(w.key, "0001feff");
        assert_eq!(w.key_bytes().unwrap(), vec![0, 1, 0xfe, 0xff]);
        let mut m = mark(3);
        m.last.insert("kv".into(), LastWrite::new(&[7u8; 3000], Some(b"v")));
        let slot = encode_slot(&m);
        let back = decode_slot(&slot).unwrap();
        assert_eq!(back.seq, 3);
        assert!(back.last.contains_key("orders") && !back.last.contains_key("kv"));
    }
}
