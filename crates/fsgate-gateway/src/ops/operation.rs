//! An operation is a type behind one trait: everything the gateway asks of it is
//! answered in its own file, and the list in `ops/mod.rs` is the only other place that
//! names it.

use serde_json::{Map, Value};

use crate::ask::Proposed;
use crate::crash::{Disk, Found};
use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::output::Output;
use crate::vcs::step::Step;
use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;

/// The texts that say where an operation acts, to be rewritten when several workspaces
/// are served: its path (a rename's source, a glob's pattern, a grep's path if it has
/// one), and a rename's destination.
pub type Places<'a> = (Option<&'a mut String>, Option<&'a mut String>);

/// One kind of operation, with its door-neutral arguments (the implementing type).
pub(crate) trait Operation {
    /// The operation's name in audit records.
    fn name() -> &'static str;

    /// The change it makes (what its intent record names, how a crash in the middle of
    /// it is reconciled and how it is staged), or None for a read.
    const CHANGE: Option<ChangeOp> = None;

    /// Quick and read-only: a door may serve it in a batch, beside others, on the
    /// thread that reads the requests (it never walks a tree or waits for a person's
    /// answer to change something).
    const QUICK_READ: bool = false;

    /// A read that lists or searches entries (ls, tree, glob, grep) rather than
    /// reading one: how a person asked about it is told what kind of access it is.
    const LISTS: bool = false;

    /// The paths and patterns the request gives, as given, each with what it is:
    /// `path`, `path2` (a rename's destination), `pattern`, `includeGlob`, `exclude`.
    fn texts(&self) -> Vec<(&'static str, &str)>;

    /// Where it acts, to be rewritten (see [`Places`]).
    fn places_mut(&mut self) -> Places<'_>;

    /// The arguments that matter for its audit record (never content).
    fn audit_args(&self, _args: &mut Map<String, Value>) {}

    /// The text a change proposes, for a question shown as a diff.
    fn proposed(&self) -> Option<Proposed> {
        None
    }

    /// Its policy checks and its work.
    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError>;

    /// What a crash in the middle of the change left on disk (a read changes nothing).
    fn found_after_crash(_disk: &Disk<'_>) -> Found {
        Found::Neither
    }

    /// What the change asks of the git index.
    fn staging<'p>(_path: &'p RelPath, _path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
        Vec::new()
    }
}

/// Declares [`Op`](super::Op) from the one list of operations (`ops/list.rs`), and
/// routes every question about an operation, or its [`OpId`], to its type.
macro_rules! operations {
    ($($variant:ident => $ty:ty,)*) => {
        /// One operation, with paths exactly as the request gave them.
        #[derive(Debug, Clone)]
        pub enum Op {
            $(#[doc = concat!("[`", stringify!($ty), "`].")] $variant($ty),)*
        }

        impl OpId {
            /// The operation's name in audit records.
            pub fn name(self) -> &'static str {
                match self { $(OpId::$variant => <$ty as Operation>::name(),)* }
            }

            /// The change the operation makes, or `None` for a read.
            pub fn change(self) -> Option<ChangeOp> {
                match self { $(OpId::$variant => <$ty as Operation>::CHANGE,)* }
            }

            /// Whether a door may serve it in a batch (see `Operation::QUICK_READ`).
            pub fn is_quick_read(self) -> bool {
                match self { $(OpId::$variant => <$ty as Operation>::QUICK_READ,)* }
            }

            /// Whether it lists or searches entries (see `Operation::LISTS`).
            pub fn lists(self) -> bool {
                match self { $(OpId::$variant => <$ty as Operation>::LISTS,)* }
            }

            pub(crate) fn found_after_crash(self, disk: &Disk<'_>) -> Found {
                match self { $(OpId::$variant => <$ty>::found_after_crash(disk),)* }
            }

            pub(crate) fn staging<'p>(self, path: &'p RelPath, path2: Option<&'p RelPath>) -> Vec<Step<'p>> {
                match self { $(OpId::$variant => <$ty>::staging(path, path2),)* }
            }
        }

        impl Op {
            /// Which operation this is.
            pub fn id(&self) -> OpId {
                match self { $(Op::$variant(_) => OpId::$variant,)* }
            }

            pub(crate) fn path_texts(&self) -> Vec<(&'static str, &str)> {
                match self { $(Op::$variant(o) => o.texts(),)* }
            }

            pub(crate) fn places_mut(&mut self) -> Places<'_> {
                match self { $(Op::$variant(o) => o.places_mut(),)* }
            }

            pub(crate) fn audit_args(&self) -> Map<String, Value> {
                let mut args = Map::new();
                match self { $(Op::$variant(o) => o.audit_args(&mut args),)* }
                args
            }

            pub(crate) fn proposed(&self) -> Option<Proposed> {
                match self { $(Op::$variant(o) => o.proposed(),)* }
            }

            pub(crate) fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
                match self { $(Op::$variant(o) => o.run(cx, facts),)* }
            }
        }
    };
}

pub(crate) use operations;
