//! The names of the gateway's temporary files: 128 random bits each (from a per-thread
//! pool of CSPRNG bytes), and the in-memory set of those in flight, which the watcher
//! asks ([`is_own_temp`]) and an agent cannot write to.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::io;
use std::sync::Mutex;

/// Names the gateway created and has not yet renamed away or removed.
static IN_FLIGHT: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// True while `name` is one of the gateway's own temporary files in flight.
pub fn is_own_temp(name: &str) -> bool {
    IN_FLIGHT.lock().map(|s| s.contains(name)).unwrap_or(false)
}

/// A fresh random name for one write's temporary file, registered as in flight until
/// dropped. Chosen before the write's intent is recorded, so that the record can name
/// it and a start after a crash can remove exactly that file.
#[derive(Debug)]
pub struct TempName(String);

impl TempName {
    /// A new random name.
    pub fn new() -> io::Result<TempName> {
        let name = format!(".fsgate-tmp-{}", hex::encode(random_128()?));
        if let Ok(mut s) = IN_FLIGHT.lock() {
            s.insert(name.clone());
        }
        Ok(TempName(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Drop for TempName {
    fn drop(&mut self) {
        if let Ok(mut s) = IN_FLIGHT.lock() {
            s.remove(&self.0);
        }
    }
}

thread_local! {
    /// Random bytes fetched ahead for this thread's names, and how many are used: one
    /// `getrandom` per [`POOL_NAMES`] names instead of one each. Used bytes are zeroed.
    static POOL: RefCell<([u8; 16 * POOL_NAMES], usize)> =
        const { RefCell::new(([0; 16 * POOL_NAMES], 16 * POOL_NAMES)) };
}

/// Names one fetch of random bytes serves.
const POOL_NAMES: usize = 32;

/// 128 bits from the operating system's CSPRNG (fetched ahead, never handed out twice).
fn random_128() -> io::Result<[u8; 16]> {
    POOL.with(|pool| {
        let (bytes, used) = &mut *pool.borrow_mut();
        if *used + 16 > bytes.len() {
            getrandom::fill(bytes).map_err(|e| io::Error::other(e.to_string()))?;
            *used = 0;
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&bytes[*used..*used + 16]);
        bytes[*used..*used + 16].fill(0);
        *used += 16;
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names drawn from the pool are all different, across refills.
    #[test]
    fn pooled_names_never_repeat() {
        let names: BTreeSet<String> = (0..3 * POOL_NAMES + 5)
            .map(|_| TempName::new().expect("name").as_str().to_string())
            .collect();
        assert_eq!(names.len(), 3 * POOL_NAMES + 5);
        assert!(names.iter().all(|n| n.len() == ".fsgate-tmp-".len() + 32));
    }
}
