//! Resolving a lexical workspace path to where it really leads, beneath the root.
//!
//! cap-std's `canonicalize` follows symlinks without ever leaving the root handle; a
//! symlink that would leave it is an error. The caller re-checks the policy on the real
//! path, so a link named `notes` that points at `.git` cannot smuggle a read past it.

use std::io;

use super::{Workspace, WsError};
use crate::path::RelPath;

/// Whether the last component is followed if it is a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow every symlink (reads, writes, listings).
    All,
    /// Not the last component (rm and rename act on the link itself).
    NotFinal,
}

/// A path resolved beneath the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The canonical workspace-relative path (no symlinks left in it).
    pub real: RelPath,
    /// True if the final entry exists.
    pub exists: bool,
    /// How many trailing components do not exist yet (0 if `exists`).
    pub missing: usize,
}

impl Workspace {
    /// Resolves `rel` beneath the root.
    pub fn resolve(&self, rel: &RelPath, follow: Follow) -> Result<Resolved, WsError> {
        let Some(name) = rel.file_name() else {
            return Ok(Resolved {
                real: RelPath::root(),
                exists: true,
                missing: 0,
            });
        };
        let parent = rel.parent().unwrap_or_default();
        if follow == Follow::NotFinal {
            let pr = self.resolve(&parent, Follow::All)?;
            let real = pr.real.join(name);
            if pr.missing > 0 {
                return Ok(Resolved {
                    real,
                    exists: false,
                    missing: pr.missing + 1,
                });
            }
            if !pr.exists {
                return Err(WsError::NotFound);
            }
            return match self.root.symlink_metadata(real.as_fs_path()) {
                Ok(_) => Ok(Resolved {
                    real,
                    exists: true,
                    missing: 0,
                }),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Resolved {
                    real,
                    exists: false,
                    missing: 1,
                }),
                Err(e) => Err(classify(e)),
            };
        }
        match self.root.canonicalize(rel.as_fs_path()) {
            Ok(p) => Ok(Resolved {
                real: to_rel(&p)?,
                exists: true,
                missing: 0,
            }),
            Err(e) if is_not_found(&e) => {
                // A dangling symlink as the last component: where it points is unknown
                // or outside; never write through it.
                if let Ok(m) = self.root.symlink_metadata(rel.as_fs_path())
                    && m.file_type().is_symlink()
                {
                    return Err(WsError::SymlinkEscape);
                }
                let pr = self.resolve(&parent, Follow::All)?;
                Ok(Resolved {
                    real: pr.real.join(name),
                    exists: false,
                    missing: pr.missing + 1,
                })
            }
            Err(e) => Err(classify(e)),
        }
    }
}

fn is_not_found(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

fn classify(e: io::Error) -> WsError {
    if e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside") {
        return WsError::SymlinkEscape;
    }
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        return WsError::SymlinkEscape;
    }
    WsError::from_io(e)
}

fn to_rel(p: &std::path::Path) -> Result<RelPath, WsError> {
    let s = p.to_str().ok_or(WsError::NotUtf8)?;
    if s.is_empty() || s == "." {
        return Ok(RelPath::root());
    }
    RelPath::parse_rooted(&format!("/{s}")).map_err(|_| WsError::SymlinkEscape)
}
