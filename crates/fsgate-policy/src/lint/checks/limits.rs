//! `limit-ceiling` and `limit-unreachable`: `[limits]` above sane ceilings or beyond
//! what one message can carry.

use crate::lint::findings::{Severity, Sink};
use crate::{OpClass, Policy};

/// Read and write limits above this are flagged (100 MiB).
const SANE_MAX_FILE_BYTES: u64 = 100 * 1024 * 1024;
/// Message limits above this are flagged (256 MiB).
const SANE_MAX_MESSAGE_BYTES: u64 = 256 * 1024 * 1024;

pub(super) fn limits(policy: &Policy, sink: &mut Sink<'_>) {
    let l = policy.limits();
    for (key, value, max) in [
        ("max_read_bytes", l.max_read_bytes, SANE_MAX_FILE_BYTES),
        ("max_write_bytes", l.max_write_bytes, SANE_MAX_FILE_BYTES),
        (
            "max_message_bytes",
            l.max_message_bytes,
            SANE_MAX_MESSAGE_BYTES,
        ),
    ] {
        if value > max {
            sink.at(
                sink.key_pos(key),
                Severity::Warning,
                "limit-ceiling",
                format!(
                    "limits.{key} = {value} is above the sane ceiling of {max} bytes ({} MiB)",
                    max >> 20
                ),
                "agents rarely need files this large; keep it at or below the ceiling",
            );
        }
    }
    if l.max_write_bytes > l.max_message_bytes && policy.can_ever(OpClass::Write) {
        sink.at(
            sink.key_pos("max_write_bytes"),
            Severity::Note,
            "limit-unreachable",
            format!(
                "max_write_bytes ({}) exceeds max_message_bytes ({}): a write that large cannot arrive in one message",
                l.max_write_bytes, l.max_message_bytes
            ),
            "lower max_write_bytes or raise max_message_bytes",
        );
    }
}
