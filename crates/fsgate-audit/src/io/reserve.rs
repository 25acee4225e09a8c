//! Disk space reserved beyond the end of the active file, so that a full disk refuses
//! changes before it refuses their records.

use super::Io;

/// Disk space kept reserved beyond the end of the active file.
pub(super) const RESERVE_BYTES: u64 = 256 * 1024;
/// Extend the reservation when less than this remains.
pub(super) const RESERVE_LOW_WATER: u64 = 64 * 1024;

impl Io {
    /// Keeps disk space reserved ahead of the log, so that a full disk is noticed (and
    /// requests refused) before a record cannot be written. Returns false when the
    /// reservation could not be extended.
    pub(crate) fn reserve(&mut self) -> bool {
        if !self.reserve_supported || self.reserved_to >= self.len + RESERVE_LOW_WATER {
            return true;
        }
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{FallocateFlags, fallocate};
            match fallocate(
                &self.file,
                FallocateFlags::KEEP_SIZE,
                self.len,
                RESERVE_BYTES,
            ) {
                Ok(()) => {
                    self.reserved_to = self.len + RESERVE_BYTES;
                    true
                }
                Err(e) if e == rustix::io::Errno::NOSPC || e == rustix::io::Errno::DQUOT => false,
                Err(_) => {
                    self.reserve_supported = false;
                    true
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.reserve_supported = false;
            true
        }
    }

    /// Gives back the space reserved past the end of the file.
    pub(crate) fn release_reservation(&mut self) {
        if self.reserved_to > 0 {
            let _ = self.file.set_len(self.len);
            self.reserved_to = 0;
        }
    }
}
