//! `tradebot store check|backup|restore|reseal|list`: the store's health and its backups. Each needs the
//! daemon stopped (it holds the store's lock; the error says so). `--replay` works on the replay's own
//! store (`<state_dir>/replay`) instead of the daemon's.

use super::StoreCmd;
use crate::out::{OutError, errln, outln};
use crate::store::{EX_DISK_FULL, EX_STORE, Store, backup, check};
use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;

fn dir(config: Option<PathBuf>, replay: bool) -> anyhow::Result<PathBuf> {
    let c = super::load_config(config)?;
    Ok(if replay { c.state_dir.join("replay") } else { c.state_dir })
}

/// `dir` for the commands that only read (`check`, `list`): the state directory must exist.
fn existing_dir(config: Option<PathBuf>, replay: bool) -> anyhow::Result<PathBuf> {
    let c = super::load_config(config)?;
    let dir = super::existing_state_dir(&c)?;
    Ok(if replay { dir.join("replay") } else { dir.to_path_buf() })
}

pub(super) fn run(cmd: StoreCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        StoreCmd::Check { config, replay } => {
            let dir = existing_dir(config, replay)?;
            match check::check(&dir) {
                Ok(r) => {
                    outln!("store {}: healthy", r.dir.display())?;
                    outln!("  write sequence {} (sentinel: {})", r.seq, r.sentinel)?;
                    for (tree, n) in &r.counts {
                        outln!("  {:<10} {n} records", tree.as_str())?;
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) if e.is_damage() => {
                    errln!("{e}");
                    print_backups(&dir)?;
                    Ok(ExitCode::from(EX_STORE))
                }
                Err(e) if e.is_disk_full() => {
                    errln!("{e}");
                    Ok(ExitCode::from(EX_DISK_FULL))
                }
                Err(e) => Err(e).context("checking the store"),
            }
        }
        StoreCmd::Backup { config, replay } => {
            let dir = dir(config, replay)?;
            let store = Store::open(&dir).context("opening the store")?;
            let s = store.backup().context("backing up the store")?;
            outln!(
                "backed up {} records of {} trees (write sequence {}) to {}",
                s.records,
                s.trees,
                s.header.seq,
                s.path.display()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        StoreCmd::Restore { config, replay, file } => {
            let dir = dir(config, replay)?;
            let file = match file {
                Some(f) => f,
                None => backup::list(&dir)
                    .with_context(|| format!("listing the backups under {}", dir.display()))?
                    .pop()
                    .with_context(|| format!("no backup under {}/{}", dir.display(), backup::BACKUP_DIR))?,
            };
            let s = backup::restore(&dir, &file).context("restoring the store")?;
            outln!(
                "restored {} records of {} trees from {} (taken {}, write sequence {}); the replaced database is kept beside it as db.replaced-*",
                s.records,
                s.trees,
                s.path.display(),
                s.header.created.format("%Y-%m-%d %H:%M:%S UTC"),
                s.header.seq
            )?;
            outln!(
                "orders and fills since the backup are taken back from the broker at the next start (tradebot's own, \
                 tb-*, as its own); the day's opening equity is as it was then"
            )?;
            match &s.kill_switch {
                Some(k) => outln!("WARNING: {k}")?,
                None => outln!("the kill switch is as it was in the replaced database")?,
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreCmd::Reseal { config, replay } => {
            let dir = dir(config, replay)?;
            let seq = backup::reseal(&dir).context("resealing the store")?;
            outln!("store {}: accepted as it is (write sequence {seq}); the sentinel now follows it", dir.display())?;
            Ok(ExitCode::SUCCESS)
        }
        StoreCmd::List { config, replay } => {
            let dir = existing_dir(config, replay)?;
            print_backups(&dir)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_backups(dir: &std::path::Path) -> Result<(), OutError> {
    match backup::list(dir) {
        Ok(list) if list.is_empty() => outln!("no backups under {}/{}", dir.display(), backup::BACKUP_DIR)?,
        Ok(list) => {
            outln!("backups (newest last):")?;
            for p in list {
                outln!("  {}", p.display())?;
            }
        }
        Err(e) => outln!("cannot list the backups under {}: {e}", dir.display())?,
    }
    Ok(())
}
