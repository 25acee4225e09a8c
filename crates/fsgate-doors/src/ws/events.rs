//! The events pushed to a subscriber: a change, lost events, directories left
//! unwatched.

use serde_json::{Value, json};

use super::channel::CHANNEL;

use fsgate_gateway::watch::{Change, ChangeKind};

/// A pushed `change` event (no requestId).
pub(crate) fn change_event(c: &Change) -> Value {
    json!({
        "channel": CHANNEL,
        "type": "change",
        "event": event_name(c.kind),
        "path": c.path.to_rooted(),
        "fileType": if c.is_dir { "directory" } else { "file" },
    })
}

/// Pushed when events were lost (a slow client, or the kernel queue overflowed):
/// the client should re-list what it shows.
pub(crate) fn overflow_event(dropped: Option<u64>) -> Value {
    json!({
        "channel": CHANNEL,
        "type": "overflow",
        "dropped": dropped,
        "message": "change events were lost; list again to resynchronise",
    })
}

/// Pushed at connection (and again when it grows) when the kernel's inotify watch limit
/// left directories unwatched: changes in them are not reported.
pub(crate) fn unwatched_event(u: &fsgate_gateway::watch::Unwatched) -> Value {
    let paths: Vec<String> = u
        .first
        .iter()
        .map(fsgate_base::path::RelPath::to_rooted)
        .collect();
    let mut event = json!({
        "channel": CHANNEL,
        "type": "unwatched",
        "limit": u.limit,
        "limitValue": u.limit_value,
        "watched": u.watched,
        "unwatched": u.count,
        "paths": paths,
        "message": u.message(),
    });
    if let Some(name) = &u.workspace {
        event["workspace"] = name.as_ref().into();
    }
    event
}

/// The wire name of a change.
fn event_name(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Create => "create",
        ChangeKind::Modify => "modify",
        ChangeKind::Delete => "delete",
    }
}
