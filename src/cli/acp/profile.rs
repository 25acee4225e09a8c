//! The agent profile in force: its files written, its variables and arguments given to
//! the agent.

use super::confine::Confined;
use crate::cli::wall::{Scratch, create_scratch};
use crate::startup;

/// An agent profile in force, and the private directory its files are in when the
/// agent has no scratch dir of its own (emptied when the profile is dropped).
pub(super) struct Profile {
    pub(super) plan: fsgate_sandbox::profile::ProfilePlan,
    _dir: Option<Scratch>,
}

/// The profile `[agent] profile` names or detects from the command: its files written
/// (in the confined agent's scratch dir, granted read, or a private one), its
/// variables added to a confined agent's environment, and one line on stderr saying
/// what it turns off and what stays on. None when no profile applies.
pub(super) fn prepare_profile(
    opened: &mut startup::Opened,
    program: &str,
    args: &[String],
    confined: Option<&mut Confined>,
) -> Result<Option<Profile>, String> {
    use fsgate_sandbox::profile::{ProfilePlan, ProfileSetting};
    let setting = opened.gateway.policy().agent().profile();
    let Some(kind) = setting.resolve(program, args) else {
        if setting == ProfileSetting::Auto {
            fsgate_base::text::eprint_line(&format!(
                "fsgate: no agent profile for {}: its built-in file tools, if any, stay on",
                program
            ));
        }
        return Ok(None);
    };
    let (dir, own) = match &confined {
        Some(c) => (c._scratch.path.join(".fsgate-profile"), None),
        None => {
            let s = create_scratch(&std::env::temp_dir())?;
            opened.keep_scratch(&s.path);
            (s.path.clone(), Some(s))
        }
    };
    let plan = ProfilePlan::new(
        kind,
        setting == ProfileSetting::Auto,
        &dir,
        confined.is_some(),
    );
    if !plan.files.is_empty() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for (name, text) in &plan.files {
            let file = dir.join(name);
            std::fs::write(&file, text)
                .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        }
    }
    if let Some(c) = confined {
        if !plan.files.is_empty() {
            let source = "the agent profile's files";
            c.plan
                .grant(&dir, fsgate_sandbox::AgentAccess::Read, source);
        }
        c.plan
            .env
            .extend(plan.env.iter().map(|(k, v)| (k.into(), v.into())));
    }
    fsgate_base::text::eprint_line(&format!("fsgate: {}", plan.summary()));
    Ok(Some(Profile { plan, _dir: own }))
}
