//! `open`: a file opened for reading by a process through the filesystem view (`fsgate
//! run`). The read's decision on the path, and the content rules on the very bytes
//! there (read once, as a read does); then the opened file itself is handed back, and
//! the view reads from it at the offsets the process asks for. A version of a file (its
//! inode, size and times) found clean is remembered: opened again, it is not scanned
//! again (its record says `contentRemembered`).

use crate::ops::cx::Cx;
use crate::ops::open_cache::Version;

use crate::ops::operation::{Operation, Places};
use serde_json::{Map, Value};
use std::sync::Arc;

use crate::facts::Facts;
use crate::ops::output::{OpenAccess, Output};
use crate::rules::{ws_error, ws_error_under};
use fsgate_base::error::GatewayError;
use fsgate_decide::{Access, EntryKind, OpClass};
use fsgate_workspace::Follow;

/// A file opened through the filesystem view (`fsgate run`): for reading, the
/// read's decision, then the opened file ([`Output::Opened`]); for writing, the
/// write's decision on the path first (its content is decided when it is written).
#[derive(Debug, Clone)]
pub struct Open {
    /// Path as given.
    pub path: String,
    /// What the file is opened for.
    pub access: OpenAccess,
}

impl Operation for Open {
    const QUICK_READ: bool = true;

    fn name() -> &'static str {
        "open"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        if self.access != OpenAccess::Read {
            args.insert("access".into(), self.access.as_str().into());
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.open(&self.path, self.access, facts)
    }
}

impl Cx<'_> {
    pub(crate) fn open(
        &self,
        path: &str,
        access: OpenAccess,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        if access != OpenAccess::Read {
            // The path may be written: refused here, the open fails at once.
            let (write, kind) = (OpClass::Write, EntryKind::File);
            self.locate(write, &rp, Follow::All, kind, facts)?;
            if access == OpenAccess::Write {
                return Ok(Output::Unit);
            }
        }
        let (real, opened) = self.locate_file(&rp, facts)?;
        let file = match opened {
            Some(file) => file,
            None => {
                self.workspace
                    .open_regular(&real)
                    .map_err(|e| ws_error(e, &rp.shown))?
                    .0
            }
        };
        let version = Version::of(&file, &real, self.pol);
        if let Some(v) = &version
            && let Some((len, digest)) = self.clean_opens.get(v)
        {
            // This very version was scanned and found clean: not read again.
            facts.content_hashed(len, digest);
            facts.args.insert("contentRemembered".into(), true.into());
            return Ok(Output::Opened(Arc::new(file)));
        }
        // The content rules decide on what is there now: the scan reads a second
        // descriptor of the same open file (the view reads at offsets, never the
        // shared position).
        let scan = file
            .try_clone()
            .map_err(|e| GatewayError::Internal(format!("cannot open a file twice: {e}")))?;
        let (limit, rule) = self.file_limit(OpClass::Read);
        // The content is held while it is checked: room for it first, from the budget
        // every door's content in flight shares (a file larger than it is read alone).
        let (budget, waiting) = (self.budget, facts.waiting);
        let lease = |size| facts.lease = Some(budget.lease_as(size, waiting));
        let content = self
            .workspace
            .read_opened(scan, limit, lease)
            .map_err(|e| ws_error_under(e, &rp.shown, rule))?;
        let read = Access::Class(OpClass::Read);
        self.check_size(read, (&rp, &real), content.bytes.len() as u64, facts)?;
        self.hash_and_check(&real, &content.bytes, &rp.shown, facts)?;
        if let (Some(v), Some(digest)) = (version, &facts.sha256) {
            self.clean_opens
                .insert(v, (content.bytes.len(), digest.clone()));
        }
        Ok(Output::Opened(Arc::new(file)))
    }
}

//END
