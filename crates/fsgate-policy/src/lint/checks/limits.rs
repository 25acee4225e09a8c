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
    processes_keep_their_limit(policy, sink);
}

/// `limit-processes`: the policy lowers what a model may read or write but leaves
/// processes through `fsgate run`'s view (the agent's own, under `fsgate run -- agent`)
/// their default: say so, where the lowered key is.
fn processes_keep_their_limit(policy: &Policy, sink: &mut Sink<'_>) {
    let raw = &policy.raw().limits;
    let l = policy.limits();
    if raw.max_process_file_bytes.is_some() {
        return;
    }
    // A write limit of a policy that never writes bounds nothing.
    let writes = policy.can_ever(OpClass::Write);
    let lowered = [
        ("max_read_bytes", raw.max_read_bytes),
        ("max_write_bytes", raw.max_write_bytes),
    ]
    .into_iter()
    .filter(|(key, _)| writes || *key == "max_read_bytes")
    .find(|(_, v)| v.is_some_and(|v| v < l.max_process_file_bytes.min(10 << 20)));
    let Some((key, Some(value))) = lowered else {
        return;
    };
    sink.at(
        sink.key_pos(key),
        Severity::Note,
        "limit-processes",
        format!(
            "limits.{key} = {value} bounds what reaches a model; a process through `fsgate run`'s view (an agent run under it too) may open and write files of max_process_file_bytes ({} bytes)",
            l.max_process_file_bytes
        ),
        "set limits.max_process_file_bytes too if processes should be bounded as tightly",
    );
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
