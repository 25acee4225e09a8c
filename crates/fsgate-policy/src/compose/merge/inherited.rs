//! The sections a file inherits whole (`[audit]`, `[backup]`, `[sandbox]`, `[agent]`,
//! `[acp]`, `[ws]`, `[ask]`, `[notify]`, `[vcs]`): set where the base has none, never
//! changed.

use super::Merged;
use crate::compose::layer::Layer;
use crate::diff::sections;
use crate::error::PolicyError;
use crate::position::{key_line, section_line};

impl Merged {
    /// `[audit]`, `[backup]`, `[sandbox]`, `[agent]`, `[acp]`, `[ws]`, `[ask]`, `[notify]`,
    /// `[vcs]`: inherited; an extending file may set one its base does not have, never
    /// change one it has.
    pub(super) fn check_sections(&self, layer: &Layer) -> Result<(), PolicyError> {
        let (b, p) = (&self.raw, &layer.raw);
        for (name, base_has, mine) in [
            ("audit", b.audit.is_some(), p.audit.is_some()),
            ("backup", b.backup.is_some(), p.backup.is_some()),
            ("sandbox", b.sandbox.is_some(), p.sandbox.is_some()),
            ("agent", b.agent.is_some(), p.agent.is_some()),
            ("acp", b.acp.is_some(), p.acp.is_some()),
            ("ws", b.ws.is_some(), p.ws.is_some()),
            ("http", b.http.is_some(), p.http.is_some()),
            ("ask", b.ask.is_some(), p.ask.is_some()),
            ("notify", b.notify.is_some(), p.notify.is_some()),
            ("vcs", b.vcs.is_some(), p.vcs.is_some()),
        ] {
            if base_has && mine {
                return Err(self.refuse(
                    name,
                    section_line(&layer.text, name),
                    format!("[{name}] is set by the base policy; a policy that extends it inherits it and cannot change it (change it in the base)"),
                ));
            }
            // A section the base lacks leaves the base at the defaults: one looser than
            // them (`allow_terminal = true`, `fsync = "never"`) would loosen the base.
            if !base_has
                && mine
                && let Some(i) = sections::loosened_from_defaults(&layer.text, name).first()
            {
                let key = i.subject.clone();
                let line = match key_line(&layer.text, name, &key) {
                    0 => section_line(&layer.text, name),
                    n => n,
                };
                return Err(self.refuse(
                    format!("{name}.{key}"),
                    line,
                    format!("[{name}] {key} = {} is looser than the default ({}) the base policy leaves in force; a policy that extends it may only tighten (set it in the base)", i.new, i.old),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn merge_sections(&mut self, layer: &Layer) {
        let p = &layer.raw;
        let r = &mut self.raw;
        r.audit = r.audit.take().or_else(|| p.audit.clone());
        r.backup = r.backup.take().or_else(|| p.backup.clone());
        r.sandbox = r.sandbox.take().or_else(|| p.sandbox.clone());
        r.agent = r.agent.take().or_else(|| p.agent.clone());
        r.acp = r.acp.take().or_else(|| p.acp.clone());
        r.ws = r.ws.take().or_else(|| p.ws.clone());
        r.http = r.http.take().or_else(|| p.http.clone());
        r.ask = r.ask.take().or_else(|| p.ask.clone());
        r.notify = r.notify.take().or_else(|| p.notify.clone());
        r.vcs = r.vcs.take().or_else(|| p.vcs.clone());
    }
}
