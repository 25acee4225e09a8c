//! The policy's `[agent]` wall, as `fsgate acp --confine-agent` gives its agent and
//! `fsgate run` its command (unless `--no-confine`): a private scratch dir (HOME and
//! TMPDIR), the section's ruleset and environment, the program's own installation if
//! discovered, and what the `agent-start` and `run` records say of it. See docs/run.md.

mod emptying;
mod plan;
mod scratch;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

pub(super) use plan::agent_plan;
pub(super) use scratch::{Scratch, create_scratch};

use crate::startup;

/// A wall worked out before the command is built: its scratch dir (emptied and removed
/// when dropped) and its plan.
pub(super) struct Wall {
    pub(super) scratch: Scratch,
    pub(super) plan: fsgate_sandbox::AgentPlan,
}

/// Why a wall could not be worked out: the program itself (not found, not runnable),
/// which a caller may answer as a shell would (127, 126), or anything else.
#[derive(Debug, thiserror::Error)]
pub(super) enum WallError {
    /// The program could not be found or run.
    #[error(transparent)]
    Program(#[from] fsgate_sandbox::discover::DiscoverError),
    /// Anything else: the scratch dir, the policy's `[agent]` section, the current dir.
    #[error("{0}")]
    Other(String),
}

impl From<String> for WallError {
    fn from(e: String) -> WallError {
        WallError::Other(e)
    }
}

/// The wall of `program` (with `args`): a private scratch directory (kept writable for
/// the gateway, which empties it at the end), the `[agent]` ruleset, and, when the
/// section discovers, the program's own installation (its executable resolved).
pub(super) fn plan_wall(
    opened: &mut startup::Opened,
    policy_file: Option<&std::path::Path>,
    (program, args): (&OsStr, &[OsString]),
) -> Result<Wall, WallError> {
    let tmp = std::env::temp_dir();
    scratch::sweep_stale_scratch(&tmp, &super::view_host::roots(&opened.gateway));
    let scratch = create_scratch(&tmp)?;
    opened.keep_scratch(&scratch.path);
    let mut plan = agent_plan(opened, policy_file, &scratch.path)?;
    if opened.gateway.policy().agent().discover() {
        let mut installation = discover(program, args)?;
        // What discovery found inside a workspace (a script run from there) is reached
        // through the view, decided there, not granted beneath it.
        let roots = super::view_host::roots(&opened.gateway);
        let beneath = |p: &std::path::Path| roots.iter().any(|r| p.starts_with(r));
        (installation.grants).retain(|g| !beneath(&g.path));
        installation.merge_into(&mut plan);
        // A data file of a workspace is read through the view: nothing to say of it.
        let data = (installation.data_files.iter()).filter(|f| !beneath(f)).map(|f| {
            format!(
                "{} is named on the command line but is not a script: not granted (a policy grants data files: [agent] read)",
                f.display()
            )
        });
        // Escaped once, as a whole line.
        for note in installation.notes.iter().cloned().chain(data) {
            fsgate_base::text::eprint_line(&format!("fsgate: note: {note}"));
        }
        plan.executable = Some(installation.executable);
    }
    Ok(Wall { scratch, plan })
}

/// The program's own installation: its resolved executable, interpreter and scripts.
fn discover(
    program: &OsStr,
    args: &[OsString],
) -> Result<fsgate_sandbox::discover::Installation, WallError> {
    use fsgate_sandbox::discover::{DiscoverInput, discover};
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    let path_var = std::env::var_os("PATH");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let rustup_home = std::env::var_os("RUSTUP_HOME").map(PathBuf::from);
    discover(&DiscoverInput {
        program,
        args,
        cwd: &cwd,
        path_var: path_var.as_deref(),
        home: home.as_deref(),
        rustup_home: rustup_home.as_deref(),
    })
    .map_err(WallError::from)
}

/// The wall prepared for a command started inside the view: the confinement, what the
/// kernel will enforce, and the word its start (`__view-exec`) applies it from.
/// Under `[sandbox] require_landlock = true` a wall not fully enforced is refused.
pub(super) fn for_view(
    plan: &fsgate_sandbox::AgentPlan,
    require_landlock: bool,
) -> Result<(fsgate_sandbox::ViewConfinement, OsString), String> {
    let confinement = fsgate_sandbox::prepare_agent_for_view(plan).map_err(|e| e.to_string())?;
    required(confinement.status(), require_landlock)?;
    let word = OsString::from(confinement.word());
    Ok((confinement, word))
}

/// Under `[sandbox] require_landlock = true`, a wall the kernel does not fully enforce
/// is refused before the command starts.
pub(super) fn required(
    status: &fsgate_sandbox::SandboxStatus,
    require_landlock: bool,
) -> Result<(), String> {
    if require_landlock && status.enforcement != fsgate_sandbox::Enforcement::Fully {
        return Err(format!(
            "[sandbox] require_landlock = true, but the wall is {status}; refusing to \
             start the command"
        ));
    }
    Ok(())
}

/// The ruleset for a record (`agent-start`'s `agentPlan`, `run`'s `plan`): every grant
/// with its source, the network, the sockets, and the names (never the values) of its
/// environment.
pub(super) fn plan_record(plan: &fsgate_sandbox::AgentPlan) -> serde_json::Value {
    let mut value = serde_json::to_value(plan).unwrap_or_default();
    let names: Vec<String> = plan
        .env
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    if let Some(obj) = value.as_object_mut() {
        obj.insert("envNames".into(), names.into());
    }
    value
}
