//! `limit-ceiling` and `limit-unreachable`: `[limits]` above sane ceilings or beyond
//! what one message can carry; `ask-timeout-range`: `[ask] timeout_secs` out of range.

use crate::lint::findings::{Severity, Sink};
use crate::{OpClass, Policy};

/// Read and write limits above this are flagged (100 MiB).
const SANE_MAX_FILE_BYTES: u64 = 100 * 1024 * 1024;
/// Message limits above this are flagged (256 MiB).
const SANE_MAX_MESSAGE_BYTES: u64 = 256 * 1024 * 1024;
/// A process's file through the view above this is flagged (1 GiB): held whole in memory.
const SANE_MAX_PROCESS_FILE_BYTES: u64 = 1024 * 1024 * 1024;

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
        (
            "max_process_file_bytes",
            l.max_process_file_bytes,
            SANE_MAX_PROCESS_FILE_BYTES,
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

/// `ask-timeout-range`: a `[ask] timeout_secs` outside 1 to 3600 loads, and is used
/// brought into that range; say so, with the value used.
pub(super) fn ask_timeout(policy: &Policy, sink: &mut Sink<'_>) {
    let set = policy.raw().ask.as_ref().and_then(|a| a.timeout_secs);
    let Some(set) = set.filter(|s| !(1..=crate::oversight::MAX_ASK_TIMEOUT_SECS).contains(s))
    else {
        return;
    };
    sink.at(
        sink.key_pos("timeout_secs"),
        Severity::Warning,
        "ask-timeout-range",
        format!(
            "ask.timeout_secs = {set} is outside 1 to {}: {} s is used",
            crate::oversight::MAX_ASK_TIMEOUT_SECS,
            policy.ask_timeout().as_secs()
        ),
        "set a number of seconds from 1 to 3600",
    );
}
