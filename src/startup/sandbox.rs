//! Of the process's sandbox, what needs no handle: what shipping the audit log needs,
//! and whether the kernel lets each workspace write.

use fsgate_decide::OpClass;
use fsgate_gateway::Gateway;
use fsgate_sandbox::{Enforcement, SandboxStatus};

/// Tells each workspace whether the kernel lets it write: always when nothing is
/// enforced, else as its rule says.
pub(super) fn set_kernel_allows_write(gw: &Gateway, status: &SandboxStatus) {
    let unenforced = status.enforcement == Enforcement::Not;
    gw.set_kernel_allows_write(unenforced || status.workspace_write);
    for m in gw.members().skip(1) {
        let p = m.policy();
        m.set_kernel_allows_write(
            unenforced || p.can_ever(OpClass::Write) || p.can_ever(OpClass::Delete),
        );
    }
}

/// What shipping to `[audit] ship` needs from the sandbox: connecting to the collectors'
/// ports and local sockets, and reading the resolver's files to resolve their names
/// again after a change.
pub(super) fn ship_grants<'a>(
    mut plan: fsgate_sandbox::SandboxPlan<'a>,
    ship: Option<&fsgate_audit::ship::ShipPlan>,
) -> fsgate_sandbox::SandboxPlan<'a> {
    let Some(ship) = ship else {
        return plan;
    };
    for port in ship.tcp_ports() {
        plan = plan.connect_port(port);
    }
    for sock in ship.sockets() {
        // `/dev/log` is often a link to the daemon's socket in another directory.
        let real = std::fs::canonicalize(&sock).unwrap_or(sock);
        if let Some(dir) = real.parent() {
            plan = plan.unix_sockets_in(dir);
        }
    }
    if ship.resolves_names() {
        for f in RESOLVER_FILES {
            plan = plan.read_only_path(*f);
        }
    }
    plan
}

/// What the C library reads to resolve a host name.
const RESOLVER_FILES: &[&str] = &[
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
];
