//! `[vcs] stage`: the git work tree each workspace lies in, and what the confinement
//! must then grant (git dirs outside the workspace, ignore files above it).

use std::path::{Path, PathBuf};

use fsgate_base::text::EscPath;
use fsgate_gateway::vcs::Stager;
use fsgate_policy::Policy;

/// `[vcs] stage = true`: the work tree the workspace lies in, found once (sharing the
/// handle of an `earlier` workspace's in the same repository). None (with a warning)
/// when there is none; Err when the policy would open git's files to the agent.
pub(crate) fn open_vcs(
    policy: &Policy,
    root: &Path,
    earlier: &[&Stager],
) -> Result<Option<Stager>, String> {
    if !policy.vcs_stage() {
        return Ok(None);
    }
    match Stager::discover(root) {
        Ok(s) => {
            s.check_policy(policy, root).map_err(|e| e.to_string())?;
            tracing::info!(workspace = %EscPath(root), workdir = %EscPath(s.workdir()), "[vcs] stage: changes are staged in git");
            Ok(Some(s.sharing(earlier)))
        }
        Err(e) => {
            tracing::warn!("[vcs] stage = true, but nothing will be staged: {e}");
            Ok(None)
        }
    }
}

pub(crate) type VcsGrants = (Vec<(PathBuf, std::fs::File)>, Vec<PathBuf>);

/// Adds to `grants` the git dirs outside the workspace `root` (opened, for the Landlock
/// rules) and the ignore files above it; each once, with several workspaces.
pub(crate) fn add_vcs_grants(
    grants: &mut VcsGrants,
    s: &Stager,
    root: &Path,
) -> Result<(), String> {
    let (rw, ro) = s.grants(root);
    for d in rw {
        if grants.0.iter().any(|(p, _)| *p == d) {
            continue;
        }
        let f = std::fs::File::open(&d)
            .map_err(|e| format!("cannot open git dir {}: {e}", EscPath(&d)))?;
        grants.0.push((d, f));
    }
    for p in ro {
        if !grants.1.contains(&p) {
            grants.1.push(p);
        }
    }
    Ok(())
}
