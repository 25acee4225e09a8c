//! The test binary's allocator: the system's, counting per thread the heap bytes live
//! and their peak since [`reset`], so a test can bound what one call holds at once.
//! Only this crate's unit-test binary has it; nothing a user builds does.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

thread_local! {
    /// Bytes allocated minus bytes freed on this thread (a block freed on another
    /// thread than its own is counted there: signed).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest `LIVE` since the last `reset`.
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

/// Starts a measurement on this thread: the peak is what is live now.
pub(crate) fn reset() {
    let live = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(live));
}

/// The most heap bytes this thread held at once since [`reset`], beyond what it held
/// then.
pub(crate) fn peak_since_reset(at_reset: isize) -> usize {
    PEAK.with(Cell::get).saturating_sub(at_reset).max(0) as usize
}

/// The heap bytes this thread holds now.
pub(crate) fn live() -> isize {
    LIVE.with(Cell::get)
}
