//! One verification under way: what it was given, and what it found so far in one
//! series (shared by the walk of the records and the checks of the sidecars).

use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;

use super::merkle::{self, CompactRange};
use super::report::{Failure, FailureKind, SeriesReport, Verdict};
use super::series::Series;

/// What verify is given besides the log files.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The public key that must have signed checkpoints and tombstones.
    pub pinned: Option<VerifyingKey>,
    /// More checkpoint files (e.g. the sink's history), besides `NAME.checkpoint`.
    pub checkpoints: Vec<PathBuf>,
    /// A state file remembering the last verified head (read, then updated if intact).
    pub trusted: Option<PathBuf>,
}

/// Per-series accumulator.
pub(crate) struct Run<'a> {
    /// What verify was given.
    pub(crate) opts: &'a VerifyOptions,
    /// The report being filled in.
    pub(crate) rep: SeriesReport,
    /// Seqs whose hash the checkpoints and trusted state need.
    pub(crate) wanted: std::collections::BTreeMap<u64, Option<[u8; 32]>>,
    /// Hash of the last record that passed.
    pub(crate) last_hash: Option<[u8; 32]>,
    /// The Merkle tree over the records read so far; `None` once a record is missing
    /// from it (the series starts after seq 1: pruned).
    pub(crate) tree: Option<CompactRange>,
    /// Merkle roots the checkpoints need, by tree size (= seq).
    pub(crate) roots: std::collections::BTreeMap<u64, Option<merkle::Hash>>,
}

impl Run<'_> {
    /// A run over `s` that has found nothing wrong yet.
    pub(crate) fn new<'a>(s: &Series, opts: &'a VerifyOptions) -> Run<'a> {
        Run {
            opts,
            rep: SeriesReport {
                log: s.display_name(),
                log_id: None,
                verdict: Verdict::Intact,
                records: 0,
                first_seq: None,
                last_seq: None,
                first_ts: None,
                last_ts: None,
                files: Vec::new(),
                checkpoint: None,
                error: None,
                warnings: Vec::new(),
                open_intents: Vec::new(),
            },
            wanted: Default::default(),
            last_hash: None,
            tree: Some(CompactRange::default()),
            roots: Default::default(),
        }
    }

    pub(crate) fn fail(
        &mut self,
        kind: FailureKind,
        seq: Option<u64>,
        at: Option<(&Path, u64)>,
        msg: String,
    ) {
        if self.rep.error.is_none() {
            self.rep.verdict = if kind == FailureKind::Unreadable {
                Verdict::Unreadable
            } else {
                Verdict::Tampered
            };
            self.rep.error = Some(Failure {
                kind,
                seq,
                file: at.map(|(p, _)| p.display().to_string()),
                line: at.map(|(_, l)| l),
                message: msg,
            });
        }
    }

    pub(crate) fn failed(&self) -> bool {
        self.rep.error.is_some()
    }

    /// Adds a record that passed to the Merkle tree, noting the root where wanted.
    pub(crate) fn observe_leaf(&mut self, seq: u64, line: &[u8]) {
        let Some(tree) = &mut self.tree else { return };
        if tree.size() + 1 != seq {
            self.tree = None;
            return;
        }
        tree.push(merkle::leaf_hash(line));
        if let Some(slot) = self.roots.get_mut(&seq) {
            *slot = Some(tree.root());
        }
    }
}
