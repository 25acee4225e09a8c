//! `read_text_file`: a text file, whole or a window of lines.

use crate::facts::Facts;
use crate::ops::cx::Cx;
use crate::ops::operation::{Operation, Places};
use crate::ops::output::Output;
use crate::read::*;
use fsgate_base::error::GatewayError;
use fsgate_workspace::text_window_range;
use serde_json::{Map, Value};

/// `fs/read_text_file`: 1-based `line`, `limit` in lines.
#[derive(Debug, Clone)]
pub struct ReadText {
    /// Path as given.
    pub path: String,
    /// First line (1-based).
    pub line: Option<u64>,
    /// Number of lines.
    pub limit: Option<u64>,
}

impl Operation for ReadText {
    const QUICK_READ: bool = true;

    fn name() -> &'static str {
        "read_text_file"
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        vec![("path", self.path.as_str())]
    }

    fn places_mut(&mut self) -> Places<'_> {
        (Some(&mut self.path), None)
    }

    fn audit_args(&self, args: &mut Map<String, Value>) {
        if let Some(l) = self.line {
            args.insert("line".into(), l.into());
        }
        if let Some(l) = self.limit {
            args.insert("limit".into(), l.into());
        }
    }

    fn run(&self, cx: &Cx<'_>, facts: &mut Facts) -> Result<Output, GatewayError> {
        cx.read_text(&self.path, self.line, self.limit, facts)
    }
}

impl Cx<'_> {
    pub(crate) fn read_text(
        &self,
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
        let (bytes, real, shown) = self.read_unchecked_content(path, facts)?;
        // The answer's window and size are found beside the content's hash.
        let answer = || {
            let text = text_of(self.pol, self.ctx, &bytes, &shown)?;
            let window = text_window_range(text, line, limit);
            let encoded = answer_fits(self.pol, self.ctx, &text[window.clone()], &shown)?;
            Ok((window, encoded))
        };
        let (window, encoded) = self.hash_and_check_then(&real, &bytes, &shown, facts, answer)?;
        let text = text_or_refuse(self.pol, self.ctx, bytes, &shown)?;
        hold_answer(facts, text.len() as u64 * copies(self.ctx) + encoded);
        if window.len() == text.len() {
            return Ok(Output::Text(text));
        }
        let Some(window) = text.get(window) else {
            return Err(GatewayError::Internal("a text window off its text".into()));
        };
        Ok(Output::Text(window.to_string()))
    }
}
