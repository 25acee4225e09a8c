//! `[limits]` merged: the stricter value wins; a looser one is an error.

use super::Merged;
use crate::compose::layer::Layer;
use crate::error::PolicyError;
use crate::position::key_line;
use fsgate_decide::{BinaryMode, Limits};

impl Merged {
    /// `[limits]`: the stricter value wins; a value looser than the base's is an error.
    pub(super) fn merge_limits(&self, layer: &Layer) -> Result<Limits, PolicyError> {
        let l = &layer.raw.limits;
        let b = self.limits;
        let key_at = |key: &str| key_line(&layer.text, "limits", key);
        let lower = |key: &str, mine: Option<u64>, base: u64| {
            match mine {
            Some(v) if v > base => Err(self.refuse(
                format!("limits.{key}"),
                key_at(key),
                format!("raises limits.{key} from {base} to {v}: a policy that extends another may only lower its limits"),
            )),
            Some(v) => Ok(v),
            None => Ok(base),
        }
        };
        let rank = |m: BinaryMode| match m {
            BinaryMode::Deny => 0,
            BinaryMode::Media => 1,
            BinaryMode::Base64 => 2,
        };
        let binary = match l.binary {
            Some(m) if rank(m) > rank(b.binary) => {
                return Err(self.refuse(
                    "limits.binary",
                    key_at("binary"),
                    format!(
                        "loosens limits.binary from {:?} to {m:?}: a policy that extends another may only make it stricter (deny, then media, then base64)",
                        b.binary
                    ),
                ));
            }
            Some(m) => m,
            None => b.binary,
        };
        Ok(Limits {
            max_read_bytes: lower("max_read_bytes", l.max_read_bytes, b.max_read_bytes)?,
            max_write_bytes: lower("max_write_bytes", l.max_write_bytes, b.max_write_bytes)?,
            binary,
            max_message_bytes: lower(
                "max_message_bytes",
                l.max_message_bytes,
                b.max_message_bytes,
            )?,
            max_process_file_bytes: lower(
                "max_process_file_bytes",
                l.max_process_file_bytes,
                b.max_process_file_bytes,
            )?,
        })
    }
}
