//! Where an undo finds the log and the backups (the same defaults as `serve`), whether a
//! running gateway holds the log, reading the log, and opening the gateway.
//!
//! # Ambient Authority
//! Opens the policy, the log's files, the backup store and the workspace by path.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fsgate_audit::series::{self, Series};
use fsgate_audit::verify::{Verdict, VerifyOptions, verify_series};
use fsgate_audit::{AuditSettings, record};
use fsgate_backup::{BackupSettings, BackupStore};
use fsgate_base::text::EscPath;
use fsgate_policy::Policy;

use super::args::{Refusal, UndoArgs};
use super::history::{History, Selection};
use crate::startup::several::{NamedRoot, keep_usable};

/// The log and the store an undo uses.
pub(crate) struct Where {
    /// The `[audit]` settings of the gateway's policy.
    settings: AuditSettings,
    /// Its `[backup]` settings.
    backup_settings: BackupSettings,
    /// The log the operator named (`--audit-log`, `[audit] path`).
    named: Option<PathBuf>,
    /// The directory holding the log's chains.
    dir: PathBuf,
    /// The backup store the operator named (`--backup-dir`, `[backup] dir`); with
    /// several workspaces, `<name>/` in it holds each one's.
    backup_root: Option<PathBuf>,
    /// The first workspace's directory.
    first: PathBuf,
    /// The workspaces, named, when the gateway served several (empty: one).
    pub(crate) several: Vec<NamedRoot>,
}

/// One workspace an undo puts back: its name among several (None: the only one), and
/// its directory.
pub(crate) struct Place<'a> {
    pub(crate) name: Option<&'a str>,
    pub(crate) dir: &'a Path,
}

/// The workspaces `args` gives, as `serve` takes them: several keep their names (the
/// usable ones); one is served without a name, whatever it is given.
fn workspaces(args: &UndoArgs) -> Result<(PathBuf, Vec<NamedRoot>), Refusal> {
    match args.workspace.as_slice() {
        [] => Err("a workspace is required".to_owned().into()),
        [one] => Ok((one.dir.clone(), Vec::new())),
        given => {
            let kept = keep_usable(given).map_err(|e| e.to_string())?;
            let first = kept.first().map(|r| r.dir.clone()).unwrap_or_default();
            Ok((first, kept))
        }
    }
}

/// Finds the log and store the gateway serving `args.workspace` uses.
pub(crate) fn locate(args: &UndoArgs) -> Result<Where, Refusal> {
    let (first, several) = workspaces(args)?;
    let policy = args
        .policy
        .as_deref()
        .map(Policy::load)
        .transpose()
        .map_err(|e| format!("invalid policy: {e}"))?;
    // Relative paths in the policy's [audit] section are relative to the policy file.
    let settings = policy
        .as_ref()
        .map(|p| p.settings().audit.clone())
        .unwrap_or_default();
    let backup_settings = policy
        .as_ref()
        .map(|p| p.settings().backup.clone())
        .unwrap_or_default();
    let state = || state_of(&first);
    let named = args.audit_log.clone().or(settings.path.clone());
    let dir = match &named {
        Some(p) => p
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
        None => state()?.join("audit"),
    };
    let backup_root = args.backup_dir.clone().or(backup_settings.dir.clone());
    Ok(Where {
        settings,
        backup_settings,
        named,
        dir,
        backup_root,
        first,
        several,
    })
}

/// The state directory of the workspace `dir` (its default log and store).
fn state_of(dir: &Path) -> Result<PathBuf, String> {
    fsgate_backup::workspace_state_dir(dir).map_err(|e| {
        format!("{e}; pass --audit-log and --backup-dir (those the gateway was given)")
    })
}

impl Where {
    /// Every workspace the undo puts back, the first first.
    pub(crate) fn places(&self) -> Vec<Place<'_>> {
        if self.several.is_empty() {
            return vec![Place {
                name: None,
                dir: &self.first,
            }];
        }
        self.several
            .iter()
            .map(|r| Place {
                name: Some(r.name.as_str()),
                dir: r.dir.as_path(),
            })
            .collect()
    }

    /// The backup store of `place`, as `serve` chose it: the store named, `<name>/` in
    /// it with several workspaces; else the workspace's own state directory's.
    fn backup_dir(&self, place: &Place<'_>) -> Result<PathBuf, String> {
        match (&self.backup_root, place.name) {
            (Some(root), Some(name)) => Ok(root.join(name)),
            (Some(root), None) => Ok(root.clone()),
            (None, _) => Ok(state_of(place.dir)?.join("backups")),
        }
    }

    /// The log's chains: the named log's series, or every chain in the default
    /// directory (one per gateway that ran at once).
    fn chains(&self) -> Result<Vec<Series>, String> {
        let none = || {
            format!(
                "no audit log at {}: nothing to undo (pass the --audit-log the gateway was given)",
                EscPath(self.named.as_deref().unwrap_or(&self.dir))
            )
        };
        if !self.dir.is_dir() {
            return Err(none());
        }
        let all = series::discover(std::slice::from_ref(&self.dir)).map_err(|_| none())?;
        let wanted = self.named.as_deref().map(series::file_name);
        let chains: Vec<Series> = all
            .into_iter()
            .filter(|s| wanted.as_deref().is_none_or(|w| s.base == w))
            .collect();
        if chains.is_empty() {
            return Err(none());
        }
        Ok(chains)
    }

    /// A description of the running gateway holding one of the log's chains, if one is.
    pub(crate) fn holder(&self) -> Option<String> {
        let chains = self.chains().ok()?;
        chains.iter().find_map(|s| {
            let lock = s.dir.join(series::lock_name(&s.base));
            let file = std::fs::File::open(&lock).ok()?;
            let op = rustix::fs::FlockOperation::NonBlockingLockExclusive;
            if rustix::fs::flock(&file, op).is_ok() {
                return None;
            }
            let pid = file
                .metadata()
                .ok()
                .and_then(|m| lock_holder(m.ino()))
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default();
            Some(format!(
                "a running gateway{pid} holds the audit log {}",
                EscPath(&s.dir.join(&s.base))
            ))
        })
    }

    /// Refuses to append unsigned checkpoints to a log whose checkpoints are signed: the
    /// gateway would refuse it at its next start.
    pub(crate) fn refuse_unsigned(&self) -> Result<(), String> {
        if self.settings.signing_key.is_some() {
            return Ok(());
        }
        let signed = self
            .chains()
            .ok()
            .into_iter()
            .flatten()
            .any(|s| fsgate_audit::checkpoints_are_signed(&s.dir.join(&s.base)));
        if signed {
            return Err("the audit log's checkpoints are signed; pass --policy (the gateway's policy, whose [audit] signing_key signs the undo's records too)".into());
        }
        Ok(())
    }

    /// The backup store of `place`, if there is one (a dry run makes none).
    pub(crate) fn open_store_if_there(
        &self,
        place: &Place<'_>,
    ) -> Result<Option<BackupStore>, String> {
        let dir = self.backup_dir(place)?;
        if !dir.is_dir() {
            return Ok(None);
        }
        BackupStore::open(&dir, &self.backup_settings)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// Opens the gateway on the workspace with the gateway's log and store, under the
    /// undo's policy (the gateway's fixed floor, secret names and deny rules carried
    /// over), confined and reconciled
    /// as `serve` is: its `start` record says transport `cli`.
    pub(crate) fn open_gateway(&self, args: &UndoArgs) -> Result<crate::startup::Opened, String> {
        let cfg = crate::startup::config::GatewayConfig {
            workspace: self.first.clone(),
            policy: args.policy.clone(),
            audit_log: self.named.clone(),
            backup_dir: self.backup_root.clone(),
            accept_broken_chain: false,
            several: self.several.clone(),
        };
        let opened = crate::startup::open(&cfg)?;
        let served = opened.gateway.policy();
        let ready = super::args::undo_policy()
            .and_then(|p| {
                opened
                    .gateway
                    .reload(p.with_denials_of(&served))
                    .map(|_| ())
            })
            .and_then(|()| crate::startup::confine(&opened, None, "cli").map(|_| ()));
        if let Err(e) = ready {
            super::args::close(&opened.gateway, "refused");
            return Err(e);
        }
        Ok(opened)
    }

    /// Reads every chain of the log, which must verify, into the selection's history.
    pub(crate) fn read(&self, sel: &Selection) -> Result<History, String> {
        let chains = self.chains()?;
        // Chains interleave by time; each keeps its own order.
        let mut records: Vec<Vec<serde_json::Value>> = Vec::with_capacity(chains.len());
        let mut seen = false;
        let mut cut = Vec::new();
        for s in &chains {
            let rep = verify_series(s, &VerifyOptions::default());
            if rep.verdict != Verdict::Intact {
                return Err(format!(
                    "the audit log {} does not verify ({}): it cannot say what to undo (`fsgate audit verify` says more)",
                    EscPath(&s.dir.join(&s.base)),
                    rep.summary_line()
                ));
            }
            let (chain, began_before) = read_chain(s, sel.session.as_deref(), &mut seen)?;
            records.push(chain);
            let pruned = rep.first_seq.filter(|&f| f > 1);
            if let Some(first) = pruned {
                cut.extend(pruned_away(
                    sel,
                    first,
                    rep.first_ts.as_deref(),
                    began_before,
                ));
            }
        }
        let mut history = History::default();
        let mut heads = vec![0usize; records.len()];
        loop {
            let next = records
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.get(heads[i]).map(|v| (ts(v), i)))
                .min();
            let Some((_, i)) = next else { break };
            history.observe(i, &records[i][heads[i]], sel);
            heads[i] += 1;
        }
        history.finish();
        history.session_seen |= seen;
        history.lost.extend(cut);
        Ok(history)
    }
}

/// What a pruned log (its first record kept is seq `first`, of time `first_ts`) no
/// longer says of the selection: a session whose first record kept comes before any
/// gateway's `start` began before the cut (`began_before`), and a `--since` earlier
/// than the first record kept asks for changes the log lost. Said on stderr (exit 1),
/// never passed over in silence.
fn pruned_away(
    sel: &Selection,
    first: u64,
    first_ts: Option<&str>,
    began_before: bool,
) -> Option<String> {
    let first_ts = first_ts.unwrap_or("?");
    if sel.session.is_some() && began_before {
        return Some(format!(
            "the log was pruned: its first record kept is seq {first} ({first_ts}), and this session may have begun before it (its gateway started before, or its ACP client carried it on); what it changed before that is not in the log, and is not undone"
        ));
    }
    let since = sel.since?;
    let kept_from =
        time::OffsetDateTime::parse(first_ts, &time::format_description::well_known::Rfc3339)
            .ok()?;
    (since < kept_from).then(|| {
        format!(
            "the log was pruned: its first record kept is seq {first} ({first_ts}); changes recorded before that are not in the log, and are not undone"
        )
    })
}

fn ts(v: &serde_json::Value) -> &str {
    v.get("ts")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
}

/// The records of one chain that say what changed: intents and their outcomes (so a
/// log of a million reads is not held). `seen`: a record named `session`.
fn read_chain(
    s: &Series,
    session: Option<&str>,
    seen: &mut bool,
) -> Result<(Vec<serde_json::Value>, bool), String> {
    use serde_json::Value;
    let mut out = Vec::new();
    // Whether `session` may have begun before the chain's first record kept: its first
    // record comes before any gateway's `start`, or it is an ACP session.
    let (mut started, mut began_before, mut met) = (false, false, false);
    for file in &s.files {
        let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", EscPath(file)))?;
        for (_, line) in fsgate_audit::line::lines(&bytes) {
            let Ok(v) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
            started |= kind == "start";
            let ours = session.is_some() && v.get("session").and_then(Value::as_str) == session;
            if ours && !met {
                (met, began_before) = (true, !started);
            }
            // An ACP client names its sessions, and may carry one on across gateways.
            began_before |= ours && v.get("transport").and_then(Value::as_str) == Some("acp");
            *seen |= ours;
            let keep = match kind {
                record::KIND_INTENT | record::KIND_RECONCILED => true,
                record::KIND_REQUEST => v["args"].get("intent").is_some(),
                _ => false,
            };
            if keep {
                out.push(v);
            }
        }
    }
    Ok((out, began_before))
}

/// Times /proc/locks is read for a lock known to be held before giving up on its pid.
const LOCKS_READS: usize = 5;

/// The pid holding a flock on the file with inode `ino`, from /proc/locks. The caller
/// found the lock held; a read that misses it is tried again: the kernel lists locks by
/// position a page at a time, so a lock taken or dropped elsewhere between two of those
/// pages can shift a line out of one read (seen in 112 of 3,000 reads while two threads
/// locked and unlocked files).
fn lock_holder(ino: u64) -> Option<u32> {
    holder_read(|| std::fs::read_to_string("/proc/locks").ok(), ino)
}

/// [`lock_holder`] with the reads of /proc/locks given: at most [`LOCKS_READS`].
fn holder_read(mut read: impl FnMut() -> Option<String>, ino: u64) -> Option<u32> {
    (0..LOCKS_READS).find_map(|_| flock_pid(&read()?, ino))
}

/// The pid of the flock on inode `ino` in `locks`, the text of /proc/locks.
fn flock_pid(locks: &str, ino: u64) -> Option<u32> {
    let suffix = format!(":{ino}");
    locks.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&"FLOCK") && f.get(5).is_some_and(|d| d.ends_with(&suffix)))
            .then(|| f.get(4)?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKS: &str = "1: POSIX  ADVISORY  WRITE 77 fd:00:4242 0 EOF\n\
                         2: FLOCK  ADVISORY  WRITE 1234 fd:00:14242 0 EOF\n\
                         3: FLOCK  ADVISORY  WRITE 5678 fd:00:4242 0 EOF\n";

    /// The flock on exactly that inode, not a POSIX lock on it nor an inode whose
    /// number ends the same.
    #[test]
    fn the_flock_on_the_inode_names_its_pid() {
        assert_eq!(flock_pid(LOCKS, 4242), Some(5678));
        assert_eq!(flock_pid(LOCKS, 14242), Some(1234));
        assert_eq!(flock_pid(LOCKS, 999), None);
    }

    /// A read that misses the held lock is tried again, up to LOCKS_READS reads.
    #[test]
    fn a_read_that_missed_the_lock_is_tried_again_a_bounded_number_of_times() {
        let mut reads = 0;
        let got = holder_read(
            || {
                reads += 1;
                Some(if reads < LOCKS_READS {
                    String::new()
                } else {
                    LOCKS.into()
                })
            },
            4242,
        );
        assert_eq!((got, reads), (Some(5678), LOCKS_READS));
        let mut reads = 0;
        let never = holder_read(
            || {
                reads += 1;
                Some(String::new())
            },
            4242,
        );
        assert_eq!((never, reads), (None, LOCKS_READS));
    }
}
