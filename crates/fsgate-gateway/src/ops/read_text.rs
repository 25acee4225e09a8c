//! `read_text_file`: a text file, whole or a window of lines.

use crate::ops::{Output, RequestCtx};
use crate::read::*;
use crate::{Facts, Gateway};
use fsgate_base::error::GatewayError;
use fsgate_policy::Policy;
use fsgate_workspace::text_window;

impl Gateway {
    pub(crate) fn read_text(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        line: Option<u64>,
        limit: Option<u64>,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        if line == Some(0) {
            return Err(GatewayError::InvalidParams(
                "line is 1-based; 0 is not a line number".into(),
            ));
        }
        let (bytes, shown) = self.read_bytes(pol, ctx, path, facts)?;
        let text = text_or_refuse(pol, ctx, bytes, &shown)?;
        let window = text_window(&text, line, limit);
        let encoded = answer_fits(pol, ctx, window, &shown)?;
        hold_answer(facts, text.len() as u64 * copies(ctx) + encoded);
        if window.len() == text.len() {
            return Ok(Output::Text(text));
        }
        Ok(Output::Text(window.to_string()))
    }
}
