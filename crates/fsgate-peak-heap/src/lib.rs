//! A test binary's allocator: the system's, counting per thread the heap bytes live and
//! their peak during a call ([`measure`]), so a test can bound what the call holds at
//! once.
//!
//! Linking this crate installs the allocator, so only tests may: it is a
//! dev-dependency of the layers whose tests use it, and nothing a user builds links it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

thread_local! {
    /// Bytes allocated minus bytes freed on this thread (a block freed on another
    /// thread than its own is counted there: signed).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest `LIVE` since the current measurement began.
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn add(delta: isize) {
    // `try_with`: an allocation while the thread's locals are torn down is not counted.
    let _ = LIVE.try_with(|live| {
        let now = live.get().wrapping_add(delta);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is passed on to `System` unchanged; the counting touches only
// thread-local cells, which need no allocation.
#[allow(unsafe_code)] // An allocator is unsafe by its trait; test builds only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Runs `f` on this thread and returns its result with the most heap bytes this thread
/// held at once meanwhile, beyond what it held before.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let out = f();
    let peak = PEAK.with(Cell::get).saturating_sub(before).max(0);
    (out, peak as usize)
}

#[cfg(test)]
mod tests {
    /// What a call holds at once is counted, what it freed before returning too.
    #[test]
    fn the_peak_of_a_call_is_counted() {
        let (len, peak) = super::measure(|| {
            let big = vec![1u8; 1 << 20];
            big.len()
        });
        assert_eq!(len, 1 << 20);
        assert!((1 << 20..2 << 20).contains(&peak), "{peak}");
        let (_, none) = super::measure(|| 1 + 1);
        assert_eq!(none, 0);
    }
}
