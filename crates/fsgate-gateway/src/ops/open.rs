//! `open`: a file opened for reading by a process through the filesystem view (`fsgate
//! run`). The read's decision on the path, and the content rules on the very bytes
//! there (read once, as a read does); then the opened file itself is handed back, and
//! the view reads from it at the offsets the process asks for.

use std::sync::Arc;

use crate::ops::{Output, RequestCtx};
use crate::{Facts, Gateway, ws_error};
use fsgate_base::error::GatewayError;
use fsgate_policy::{Access, OpClass, Policy};

impl Gateway {
    pub(crate) fn open(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let rp = self.parse_path(ctx, path)?;
        facts.path = Some(rp.rel.as_str().to_string());
        let (real, opened) = self.locate_file(pol, &rp, facts)?;
        let file = match opened {
            Some(file) => file,
            None => {
                self.workspace
                    .open_regular(&real)
                    .map_err(|e| ws_error(e, &rp.shown))?
                    .0
            }
        };
        // The content rules decide on what is there now: the scan reads a second
        // descriptor of the same open file (the view reads at offsets, never the
        // shared position).
        let scan = file
            .try_clone()
            .map_err(|e| GatewayError::Internal(format!("cannot open a file twice: {e}")))?;
        let limit = pol.limits().max_read_bytes;
        let content = self
            .workspace
            .read_opened(scan, limit, |_| {})
            .map_err(|e| ws_error(e, &rp.shown))?;
        let read = Access::Class(OpClass::Read);
        Self::check_size(pol, read, (&rp, &real), content.bytes.len() as u64, facts)?;
        Self::hash_and_check(pol, &real, &content.bytes, &rp.shown, facts)?;
        Ok(Output::Opened(Arc::new(file)))
    }
}
