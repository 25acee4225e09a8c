//! `read_file`: a file as text, or as base64 where the policy lets binary content out.

use crate::ops::cx::Cx;

use crate::ops::operation::{Operation, Places};
use base64::Engine;

use crate::facts::Facts;
use crate::ops::output::{Encoding, Output};
use crate::read::*;
use fsgate_base::error::GatewayError;
use fsgate_decide::BinaryMode;
use fsgate_policy::media::is_media;

/// `_fsgate/read_file`: text, or base64 for binary where the policy allows.
#[derive(Debug, Clone)]
pub struct ReadFile {
    /// Path as given.
    pub path: String,
}

impl Operation for ReadFile {
    const QUICK_READ: bool = true;

    fn name() -> &'static str {
        "read_file"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.read_file(&self.path, facts)
    }
}

impl Cx<'_> {
    pub(crate) fn read_file(&self, path: &str, facts: &mut Facts) -> Result<Output, GatewayError> {
        let (bytes, shown) = self.read_bytes(path, facts)?;
        if fsgate_workspace::is_binary(&bytes) {
            let mode = self.pol.limits().binary;
            if mode == BinaryMode::Base64 || (mode == BinaryMode::Media && is_media(&shown, &bytes))
            {
                let content = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let encoded = answer_fits(self.pol, self.ctx, &content, &shown)?;
                hold_answer(facts, bytes.len() as u64 * copies(self.ctx) + encoded);
                return Ok(Output::File {
                    content,
                    encoding: Encoding::Base64,
                });
            }
            return Err(binary_refusal(self.pol, self.ctx, &shown));
        }
        let text =
            String::from_utf8(bytes).map_err(|_| binary_refusal(self.pol, self.ctx, &shown))?;
        let encoded = answer_fits(self.pol, self.ctx, &text, &shown)?;
        hold_answer(facts, text.len() as u64 * copies(self.ctx) + encoded);
        Ok(Output::File {
            content: text,
            encoding: Encoding::Utf8,
        })
    }
}
