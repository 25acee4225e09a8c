//! What this kernel's Landlock offers: its ABI, the access rights used for it, what it
//! cannot restrict, and why there is none.

use std::os::fd::BorrowedFd;

use ::landlock::{ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, RestrictSelf, Scope};

use crate::error::SandboxError;

/// The ABI from which every restriction the plan asks for exists: truncate (3), TCP (4),
/// device ioctl (5), abstract-socket and signal scoping (6).
pub(super) const FULL_ABI: ABI = ABI::V6;

/// The access rights used for one kernel ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rights {
    /// Every filesystem right the kernel knows: anything not granted below is refused.
    pub handled_fs: BitFlags<AccessFs>,
    /// TCP rights handled (empty before ABI 4).
    pub handled_net: BitFlags<AccessNet>,
    /// IPC scopes (empty before ABI 6).
    pub scopes: BitFlags<Scope>,
    /// Read a file, list a directory. Not `AccessFs::from_read`, which adds Execute.
    pub read: BitFlags<AccessFs>,
    /// What a writable directory tree needs on top of `read`: write, create regular
    /// files and directories, remove, truncate, cross-directory rename. Never devices,
    /// sockets, fifos or symlinks, never execute or device ioctl.
    pub write: BitFlags<AccessFs>,
}

impl Rights {
    /// The rights for `abi`, each masked to what that ABI can handle.
    pub(crate) fn for_abi(abi: ABI) -> Self {
        let handled_fs = AccessFs::from_all(abi);
        let write = AccessFs::WriteFile
            | AccessFs::RemoveFile
            | AccessFs::RemoveDir
            | AccessFs::MakeReg
            | AccessFs::MakeDir
            | AccessFs::Refer
            | AccessFs::Truncate;
        Rights {
            handled_fs,
            handled_net: AccessNet::from_all(abi),
            scopes: Scope::from_all(abi),
            read: (AccessFs::ReadFile | AccessFs::ReadDir) & handled_fs,
            write: write & handled_fs,
        }
    }

    /// Rights for a read-only grant on a file (`ReadDir` is invalid on non-directories).
    pub(super) fn read_file(&self) -> BitFlags<AccessFs> {
        self.read & AccessFs::ReadFile
    }
}

/// Landlock's view of this kernel, without restricting anything.
pub(crate) fn probe() -> LandlockStatus {
    // No flags and no no_new_privs: `apply` returns the status without a syscall that
    // changes anything.
    match RestrictSelf::default().no_new_privs(false).apply() {
        Ok(s) => s.landlock,
        Err(_) => LandlockStatus::NotImplemented,
    }
}

/// The ABI to use, None without Landlock.
pub(crate) fn usable_abi(status: LandlockStatus) -> Option<ABI> {
    match status {
        LandlockStatus::Available { effective_abi, .. } if effective_abi != ABI::Unsupported => {
            Some(effective_abi)
        }
        _ => None,
    }
}

/// Why there is no Landlock, in words.
pub(super) fn absent_reason(status: LandlockStatus) -> &'static str {
    match status {
        LandlockStatus::NotEnabled => {
            "Landlock is built into this kernel but disabled: add landlock to the lsm= boot parameter"
        }
        _ => {
            "this kernel has no Landlock: it needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK"
        }
    }
}

pub(super) fn ll_err(
    stage: impl Into<String>,
) -> impl FnOnce(::landlock::RulesetError) -> SandboxError {
    let stage = stage.into();
    move |e| SandboxError::Landlock {
        stage,
        source: Box::new(e),
    }
}

/// Planned restrictions an `abi` kernel cannot express.
pub(crate) fn missing_for(abi: ABI) -> Vec<String> {
    let mut missing = Vec::new();
    if abi < ABI::V3 {
        missing.push("truncating files is not restricted (needs ABI 3, Linux 6.2)".to_owned());
    }
    if abi < ABI::V4 {
        missing.push("TCP bind/connect are not restricted (needs ABI 4, Linux 6.7)".to_owned());
    }
    if abi < ABI::V5 {
        missing
            .push("ioctl on device files is not restricted (needs ABI 5, Linux 6.10)".to_owned());
    }
    if abi < ABI::V6 {
        missing.push(
            "abstract Unix sockets and signals are not scoped (needs ABI 6, Linux 6.12)".to_owned(),
        );
    }
    missing
}

pub(super) fn is_dir(fd: BorrowedFd<'_>) -> Result<bool, SandboxError> {
    rustix::fs::fstat(fd)
        .map(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
        })
        .map_err(|e| SandboxError::Io {
            what: "stat a granted handle".into(),
            source: e.into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_follow_the_abi() {
        let v1 = Rights::for_abi(ABI::V1);
        assert!(
            !v1.write.contains(AccessFs::Refer),
            "Refer is not handled before ABI 2"
        );
        assert!(!v1.write.contains(AccessFs::Truncate));
        assert!(v1.handled_net.is_empty() && v1.scopes.is_empty());
        let v7 = Rights::for_abi(ABI::V7);
        assert!(v7.write.contains(AccessFs::Refer | AccessFs::Truncate));
        assert!(
            v7.handled_fs
                .contains(AccessFs::IoctlDev | AccessFs::Execute)
        );
        assert_eq!(v7.handled_net, AccessNet::BindTcp | AccessNet::ConnectTcp);
        assert_eq!(v7.scopes, Scope::AbstractUnixSocket | Scope::Signal);
        for r in [v1, v7, Rights::for_abi(ABI::V9)] {
            assert_eq!(
                r.read,
                AccessFs::ReadFile | AccessFs::ReadDir,
                "no Execute in read"
            );
            assert!(!r.write.contains(AccessFs::Execute | AccessFs::IoctlDev));
            assert!(!r.write.contains(AccessFs::MakeSym) && !r.write.contains(AccessFs::MakeChar));
            assert_eq!(
                r.write & !r.handled_fs,
                BitFlags::EMPTY,
                "only handled rights granted"
            );
        }
    }

    #[test]
    fn older_abis_are_reported_as_partial() {
        assert_eq!(missing_for(ABI::V1).len(), 4);
        assert_eq!(missing_for(ABI::V3).len(), 3);
        assert!(missing_for(ABI::V6).is_empty());
        assert!(missing_for(ABI::V7).is_empty());
        assert!(missing_for(ABI::V4)[0].contains("ioctl"));
    }
}
