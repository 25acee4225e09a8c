//! What fsgate writes into the messages it relays: the agent profile's `_meta` in a
//! session request, `_meta.fsgate` in the agent's `initialize` answer; and who the
//! hosted server asks and tells.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::line::{id_key, line_of, with_newline};
use super::state::Relay;

impl Relay {
    /// Who the hosted server asks and tells: the editor, as for `fs/*`.
    pub(super) fn editor_sinks(
        &self,
    ) -> (
        Arc<dyn fsgate_gateway::ask::Asker>,
        Option<Arc<dyn fsgate_gateway::ChangeSink>>,
    ) {
        let notes = self
            .gw
            .policy()
            .notify_acp()
            .then(|| Arc::clone(&self.notes) as Arc<dyn fsgate_gateway::ChangeSink>);
        (
            Arc::clone(&self.asker) as Arc<dyn fsgate_gateway::ask::Asker>,
            notes,
        )
    }

    /// A session request (one line, its newline included) with the agent profile's
    /// `_meta` merged in, naming `server` (the hosted server's name in this session);
    /// byte for byte when there is no profile or its params are not an object.
    pub(super) fn with_profile(&self, raw: Vec<u8>, server: Option<&str>) -> Vec<u8> {
        use fsgate_sandbox::profile::{HOSTED_SERVER, merge_session_meta, meta_for_server};
        let Some(meta) = &self.session_meta else {
            return raw;
        };
        let Ok(mut message) = serde_json::from_slice::<Value>(&raw) else {
            return raw;
        };
        let meta = match server {
            Some(name) if name != HOSTED_SERVER => meta_for_server(meta, name),
            _ => meta.clone(),
        };
        if merge_session_meta(&mut message["params"], &meta) {
            line_of(&message)
        } else {
            raw
        }
    }

    /// The agent's answer to the editor's `initialize`, with fsgate's `_meta.fsgate`
    /// (policy, sandbox, where the audit log and backups are) put in its result, in
    /// place of anything the agent wrote there: the editor learns it from fsgate, never
    /// from the agent. Other answers pass byte for byte.
    pub(super) fn stamp_initialize(&self, id: &Value, mut message: Value, raw: Vec<u8>) -> Vec<u8> {
        let ours = self
            .initializing
            .lock()
            .is_ok_and(|mut ids| ids.remove(&id_key(id)));
        let Some(result) = message.get_mut("result").filter(|_| ours) else {
            return with_newline(raw);
        };
        let mcp = &result["agentCapabilities"]["mcpCapabilities"];
        let (http, over_acp) = (
            mcp["http"] == Value::Bool(true),
            mcp["acp"] == Value::Bool(true),
        );
        self.agent_http.store(http, Ordering::Release);
        self.agent_acp.store(over_acp, Ordering::Release);
        let version = result["protocolVersion"].as_u64().unwrap_or(1);
        self.acp_version.store(version, Ordering::Release);
        let Some(result) = result.as_object_mut() else {
            return with_newline(raw);
        };
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(serde_json::Map::new());
        }
        meta["fsgate"] = self.gw.meta();
        meta["fsgate"]["acpProtocolVersion"] = version.into();
        if let Some(h) = &self.hosted {
            meta["fsgate"]["mcpServer"] =
                json!({"name": crate::hosted::SERVER_NAME, "url": h.url()});
        }
        line_of(&message)
    }
}
