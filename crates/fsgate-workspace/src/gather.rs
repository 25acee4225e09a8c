//! A walk that gathers what a decider keeps of each entry (a glob's matches, a tree's
//! entries) up to an answer's room, on up to one thread per core, with the answer a
//! single walk gives.
//!
//! The start directory's entries are decided here in name order, and with them, while
//! there are fewer directories to walk apart than [`UNITS_PER_THREAD`](threads::UNITS_PER_THREAD) a thread, the
//! entries of those directories (up to [`SPLIT_LEVELS`](plan::SPLIT_LEVELS) levels): a start with a few large
//! directories would leave a thread idle while another walks the last of them. Each
//! directory left to enter is then walked apart (depth-first in name order, as the single
//! walk does), by whichever thread is free, and what it keeps is put in its place in the
//! start's order. The answer is then the single walk's, item for item.
//!
//! What is held here stays under about three times the answer's room (in bytes and in
//! items): the items decided before the walks apart at most the room (past it, the single
//! walk answers); a directory's walk stops once its own items fill the room, and with it
//! every walk of a directory after it (the cut lies in it or before it); every walk stops
//! once the walks apart hold twice the room. The answer is cut where the single walk
//! would cut it, if every directory before that point was walked to its end or to its own
//! full room. The directories whose entries were decided here stay open until the walks
//! end (at most [`MAX_UNITS`](threads::MAX_UNITS)); each directory walked apart is opened when its walk
//! starts, as the single walk opens it (never all at once: a start may hold more
//! directories than the process may hold descriptors).
//!
//! What the single walk does differently is left to it: a cut this walk cannot place,
//! any directory's walk that fails (it answers what it found before, or the error), no
//! helper thread free (see `search_pool::Permits`, shared with grep), a walk that reads
//! metadata.
//!
//! Here: the walk's entry and the single walk. In `gather/`: what a decider answers and
//! what the walk gathers (`answer`), the room the threads share (`shared`), the
//! entries decided before the walks apart (`plan`) and the walks on threads (`threads`).

pub(crate) mod answer;
mod plan;
mod shared;
mod threads;

use std::borrow::Cow;

use crate::error::WsError;
use crate::open::open_dir;
use crate::permits::Permits;
use crate::root::Workspace;
use crate::walk::{Entry, Keeping, MAX_DEPTH, Visit, walk_dir};
use answer::{Gathered, Reading, Room, Take, Tally};
use fsgate_base::path::RelPath;
use shared::after_keep;
use threads::{on_threads, units};

impl Workspace {
    /// Walks beneath the directory `start` (canonical) depth-first in name order, at
    /// most [`MAX_DEPTH`] levels down, gathering what each entry's decider keeps until
    /// the answer's `room` is full. Symlinks are reported, never followed. Each
    /// `new_decider()` decides entries for one thread of the walk (see the module's
    /// comment); the answer is the same on one thread or several.
    pub fn gather<T, D>(
        &self,
        start: &RelPath,
        (reading, room): (Reading, Room),
        new_decider: &(dyn Fn() -> D + Sync),
    ) -> Result<Gathered<T>, WsError>
    where
        T: Send,
        D: FnMut(Cow<'_, Entry>) -> Take<T>,
    {
        if reading != Reading::Metadata {
            let permits = Permits::take();
            if permits.count() == 0 {
                tracing::debug!("walk: no helper thread free");
            } else if let Some(found) = on_threads(
                self,
                (start, reading, room),
                new_decider,
                (permits.count(), units(permits.count())),
            ) {
                return Ok(found);
            }
        }
        single(self, (start, reading, room), &mut new_decider())
    }
}

/// The walk on this thread alone.
fn single<T, D: FnMut(Cow<'_, Entry>) -> Take<T>>(
    ws: &Workspace,
    (start, reading, room): (&RelPath, Reading, Room),
    decide: &mut D,
) -> Result<Gathered<T>, WsError> {
    let mut tally = Tally::new(room);
    let mut visit = |e: Cow<'_, Entry>| match decide(e) {
        Take::Skip => Visit::Skip,
        Take::Enter => Visit::Descend,
        Take::Keep { item, cost, enter } => after_keep(tally.add(item, cost), enter),
    };
    let walked = open_dir(&ws.root, start)
        .map_err(WsError::from_io)
        .and_then(|dir| {
            walk_dir(
                dir,
                start,
                MAX_DEPTH,
                reading.mode(),
                &mut Keeping(&mut visit),
            )
        });
    let deep = match walked {
        Ok(walked) => walked.truncated(),
        // The start, or a directory as it was read, gone or no longer a directory: a
        // lenient walk answers what it found before.
        Err(WsError::NotFound | WsError::NotDir) if reading.lenient() => false,
        Err(e) => return Err(e),
    };
    Ok(tally.finish(deep))
}
