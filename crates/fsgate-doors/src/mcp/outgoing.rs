//! Answers on their way to the output copier, with the requests whose rooms they
//! release once written.

use std::io::{self, Write};

use super::flow::Pending;

use super::encoded::Streamed;
use super::text_answer::{write_escaped, write_text};

/// Answers for the output copier, with the requests whose rooms they release once written.
#[derive(Default)]
pub(super) struct Outgoing {
    /// Whole JSON-RPC messages, each ending in a newline.
    pub bytes: Vec<u8>,
    /// A large text answer, written after `bytes`, escaped as it goes out.
    pub text: Option<Streamed>,
    /// Dropped once `bytes` is written.
    pub pending: Vec<Pending>,
}

impl From<Vec<u8>> for Outgoing {
    fn from(bytes: Vec<u8>) -> Outgoing {
        Outgoing {
            bytes,
            ..Outgoing::default()
        }
    }
}

impl Outgoing {
    pub(super) fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.text.is_none()
    }

    /// Appends `next` if this one ends in plain bytes, so both go out in one write;
    /// else gives it back.
    pub(super) fn absorb(&mut self, next: Outgoing) -> Result<(), Outgoing> {
        if self.text.is_some() {
            return Err(next);
        }
        self.bytes.extend_from_slice(&next.bytes);
        self.text = next.text;
        self.pending.extend(next.pending);
        Ok(())
    }

    /// Writes the answers: the bytes, then the text answer.
    pub(super) fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        if !self.bytes.is_empty() {
            w.write_all(&self.bytes)?;
        }
        match &self.text {
            Some(t) if t.escaped => write_escaped(w, &t.key, &t.text),
            Some(t) => write_text(w, &t.key, &t.text, STREAM_PIECE),
            None => Ok(()),
        }
    }
}

/// Pieces of text a [`Streamed`] answer escapes and writes at a time.
pub(super) const STREAM_PIECE: usize = 256 * 1024;
