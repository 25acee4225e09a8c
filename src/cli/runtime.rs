//! The tokio runtimes, started once the process is confined, with the stop signals and
//! SIGHUP's policy reload.

use std::path::PathBuf;
use std::sync::Arc;

use fsgate_gateway::Gateway;
use fsgate_policy::Policy;

/// The runtime, SIGHUP reloading the policy from `policy`, and the stop signals
/// (SIGTERM, SIGINT) to wait on.
pub(super) fn runtime_with_signals(
    gateway: &Arc<Gateway>,
    policy: Option<PathBuf>,
) -> Result<(tokio::runtime::Runtime, crate::signals::Stop), String> {
    with_signals(runtime()?, gateway, policy)
}

/// [`runtime_with_signals`] on `runtime`.
pub(super) fn with_signals(
    runtime: tokio::runtime::Runtime,
    gateway: &Arc<Gateway>,
    policy: Option<PathBuf>,
) -> Result<(tokio::runtime::Runtime, crate::signals::Stop), String> {
    let (stop, reloads) = crate::signals::listen(runtime.handle())?;
    spawn_reload_on_sighup(&runtime, gateway, policy, reloads);
    Ok((runtime, stop))
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("fsgate")
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// The runtime of a stdio door: the main thread alone runs its tasks (the door reads
/// stdin and answers on threads of its own, and runs slow work on the blocking pool), so
/// an idle gateway has no runtime worker waiting besides it.
pub(super) fn stdio_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("fsgate")
        .thread_keep_alive(fsgate_doors::batch::KEEP_ALIVE)
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// SIGHUP reloads the policy file: the new policy is validated first, and an invalid
/// one is rejected with the old one kept in force.
fn spawn_reload_on_sighup(
    runtime: &tokio::runtime::Runtime,
    gateway: &Arc<Gateway>,
    path: Option<PathBuf>,
    mut hup: crate::signals::Reloads,
) {
    let gw = Arc::clone(gateway);
    runtime.spawn(async move {
        while hup.recv().await.is_some() {
            let Some(path) = path.as_ref() else {
                tracing::warn!("SIGHUP: running on the built-in policy; nothing to reload");
                continue;
            };
            let loaded = Policy::load(path).map_err(|e| {
                let msg = e.to_string();
                if msg.contains("Permission denied") {
                    format!(
                        "{msg}: the kernel sandbox admits only the policy file opened at start; \
                         an editor that saves by replacing the file makes a new one. Write the \
                         new text into the same file (e.g. `cat new.toml > policy.toml`) or restart fsgate"
                    )
                } else {
                    msg
                }
            });
            match loaded.and_then(|p| gw.reload(p)) {
                Ok((old, new)) => {
                    tracing::warn!(old_sha256 = %old, new_sha256 = %new, "policy reloaded");
                    note_reload(&gw, &path.display().to_string(), Ok((old, new)));
                }
                Err(e) => {
                    tracing::error!("policy reload rejected, the old policy stays in force: {e}");
                    note_reload(&gw, &path.display().to_string(), Err(e));
                }
            }
        }
    });
}

/// Records the result of a policy reload: a `reload` audit record with both hashes,
/// or a `reload-rejected` record saying why the old policy stays in force.
fn note_reload(gw: &Gateway, origin: &str, result: Result<(String, String), String>) {
    let mut details = serde_json::Map::new();
    details.insert("policy".into(), origin.into());
    match result {
        Ok((old, new)) => {
            details.insert("old_sha256".into(), old.clone().into());
            details.insert("new_sha256".into(), new.clone().into());
            gw.record("reload", details);
            gw.set_meta("policyReloadedFrom", (old + " -> " + &new).into());
        }
        Err(e) => {
            details.insert("error".into(), e.clone().into());
            details.insert("in_force_sha256".into(), gw.policy().sha256().into());
            gw.record("reload-rejected", details);
            gw.set_meta("lastReloadError", e.into());
        }
    }
}
