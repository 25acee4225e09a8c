//! Undoing changes that touch unrelated paths at once: each change waits only for the
//! changes before it (in undo order) that touch the same path, a directory above it, or
//! a path beneath it; the rest run on a few threads, so their records share the log's
//! group commit and their syncs overlap.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use super::change::{Change, What};
use super::plan::ancestors;

/// The paths undoing `c` reads or changes: its own, and the directories it may remove
/// above them (those it made). Directories it makes above its paths are not listed:
/// whoever removes one lists it, and it lies above this change's paths.
pub fn footprint(c: &Change) -> Vec<String> {
    let above = |path: &str, n: usize| -> Vec<String> {
        std::iter::once(path)
            .chain(ancestors(path).take(n))
            .map(str::to_owned)
            .collect()
    };
    match &c.what {
        What::Content {
            path, made_dirs, ..
        } => above(path, *made_dirs),
        What::Mkdir { path, made } => above(path, made.saturating_sub(1)),
        What::Remove { path, .. }
        | What::Chmod { path, .. }
        | What::Utimes { path, .. }
        | What::Symlink { path } => vec![path.clone()],
        What::Rename { from, to, .. } => vec![from.clone(), to.clone()],
    }
}

/// For each change (in undo order), the earlier ones it must wait for: for every path
/// it touches, the latest earlier change of that path, of each directory above it, and
/// of each distinct path beneath it (the earlier changes of one path wait for each
/// other in turn).
pub fn dependencies(footprints: &[Vec<String>]) -> Vec<Vec<usize>> {
    let mut latest: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(footprints.len());
    for (i, paths) in footprints.iter().enumerate() {
        let mut deps = Vec::new();
        for p in paths {
            let above = std::iter::once(p.as_str()).chain(ancestors(p));
            deps.extend(above.filter_map(|a| latest.get(a).copied()));
            let start = format!("{p}/");
            let beneath = latest.range(start.clone()..);
            deps.extend(
                beneath
                    .take_while(|(k, _)| k.starts_with(&start))
                    .map(|(_, &j)| j),
            );
        }
        deps.sort_unstable();
        deps.dedup();
        for p in paths {
            latest.insert(p.clone(), i);
        }
        out.push(deps);
    }
    out
}

/// Runs `run` on every step, each once the steps it depends on are done, on `workers`
/// threads, each with its own `make()`; the results in step order (None: `run` panicked).
pub fn run_ordered<W, T: Send>(
    deps: &[Vec<usize>],
    workers: usize,
    make: impl Fn() -> W + Sync,
    run: impl Fn(&mut W, usize) -> T + Sync,
) -> Vec<Option<T>> {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, d) in deps.iter().enumerate() {
        for &j in d {
            dependents[j].push(i);
        }
    }
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let (task_tx, task_rx) = mpsc::channel::<usize>();
    let task_rx = Arc::new(Mutex::new(task_rx));
    let (done_tx, done_rx) = mpsc::channel::<(usize, Option<T>)>();
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, n.max(1)) {
            let (rx, tx, make, run) = (Arc::clone(&task_rx), done_tx.clone(), &make, &run);
            scope.spawn(move || {
                let mut w = make();
                loop {
                    let next = rx.lock().map(|r| r.recv());
                    let Ok(Ok(i)) = next else { break };
                    let out =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut w, i)));
                    if tx.send((i, out.ok())).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        for i in (0..n).filter(|&i| waiting[i] == 0) {
            let _ = task_tx.send(i);
        }
        for _ in 0..n {
            let Ok((i, out)) = done_rx.recv() else { break };
            results[i] = out;
            for &d in &dependents[i] {
                waiting[d] -= 1;
                if waiting[d] == 0 {
                    let _ = task_tx.send(d);
                }
            }
        }
        drop(task_tx);
    });
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn paths(list: &[&[&str]]) -> Vec<Vec<String>> {
        list.iter()
            .map(|ps| ps.iter().map(|p| (*p).to_owned()).collect())
            .collect()
    }

    #[test]
    fn a_change_waits_for_the_earlier_ones_above_beneath_and_at_its_paths() {
        let deps = dependencies(&paths(&[
            &["d/x"],
            &["d/y"],
            &["e/z"],
            &["d/x"],
            &["d", "d/q"],
            &["f", "e/z/w"],
        ]));
        assert_eq!(deps[0], Vec::<usize>::new());
        assert_eq!(deps[1], Vec::<usize>::new(), "siblings are unrelated");
        assert_eq!(deps[3], vec![0], "the same path");
        assert_eq!(deps[4], vec![1, 3], "everything beneath d (0 through 3)");
        assert_eq!(deps[5], vec![2], "a path above");
    }

    #[test]
    fn steps_run_after_what_they_wait_for_and_results_keep_their_order() {
        let deps = dependencies(&paths(&[&["a/1"], &["a/2"], &["b"], &["a"], &["b/c"]]));
        let clock = AtomicUsize::new(0);
        let out = run_ordered(
            &deps,
            4,
            || (),
            |_, i| {
                std::thread::sleep(std::time::Duration::from_millis(5 * (5 - i as u64)));
                (i, clock.fetch_add(1, Ordering::SeqCst))
            },
        );
        let at: Vec<usize> = out.iter().map(|o| o.expect("ran").1).collect();
        assert_eq!(
            out.iter().map(|o| o.expect("ran").0).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert!(
            at[3] > at[0] && at[3] > at[1],
            "a after a/1 and a/2: {at:?}"
        );
        assert!(at[4] > at[2], "b/c after b: {at:?}");
    }
}
