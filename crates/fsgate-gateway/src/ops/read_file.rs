//! `read_file`: a file as text, or as base64 where the policy lets binary content out.

use base64::Engine;

use crate::ops::{Encoding, Output, RequestCtx};
use crate::read::*;
use crate::{Facts, Gateway};
use fsgate_base::error::GatewayError;
use fsgate_decide::BinaryMode;
use fsgate_policy::Policy;
use fsgate_policy::media::is_media;

impl Gateway {
    pub(crate) fn read_file(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        path: &str,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        let (bytes, shown) = self.read_bytes(pol, ctx, path, facts)?;
        if fsgate_workspace::is_binary(&bytes) {
            let mode = pol.limits().binary;
            if mode == BinaryMode::Base64 || (mode == BinaryMode::Media && is_media(&shown, &bytes))
            {
                let content = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let encoded = answer_fits(pol, ctx, &content, &shown)?;
                hold_answer(facts, bytes.len() as u64 * copies(ctx) + encoded);
                return Ok(Output::File {
                    content,
                    encoding: Encoding::Base64,
                });
            }
            return Err(binary_refusal(pol, ctx, &shown));
        }
        let text = String::from_utf8(bytes).map_err(|_| binary_refusal(pol, ctx, &shown))?;
        let encoded = answer_fits(pol, ctx, &text, &shown)?;
        hold_answer(facts, text.len() as u64 * copies(ctx) + encoded);
        Ok(Output::File {
            content: text,
            encoding: Encoding::Utf8,
        })
    }
}
