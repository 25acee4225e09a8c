//! Reading a file in fixed-size chunks and checking a chunk's lines on all cores.

use std::io::Read;
use std::path::Path;

use crate::line::{self, LineFault, LineInfo, check_line};

/// Bytes read per chunk.
pub(super) const CHUNK: usize = 8 << 20;

/// Tests shrink the chunk to cross many chunk boundaries on small logs.
#[cfg(test)]
pub(crate) static CHUNK_OVERRIDE: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

pub(super) fn chunk_bytes() -> usize {
    #[cfg(test)]
    {
        let n = CHUNK_OVERRIDE.load(std::sync::atomic::Ordering::Relaxed);
        if n > 0 {
            return n;
        }
    }
    CHUNK
}

/// Checks lines on all cores when there are many (each line checks on its own).
pub(super) fn check_all(lines: &[&[u8]]) -> Vec<Result<LineInfo, LineFault>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || lines.len() < 4096 {
        let mut scratch = Vec::new();
        return lines.iter().map(|l| check_line(l, &mut scratch)).collect();
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut scratch = Vec::new();
                    part.iter()
                        .map(|l| check_line(l, &mut scratch))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![Err(LineFault::Malformed("checker panicked".into()))])
            })
            .collect()
    })
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
pub(super) fn fill(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Whether a line of `path` after byte `from` checks out and has `seq` (only asked on
/// the failure path, to tell reordered records from missing ones).
pub(super) fn later_line_has_seq(path: &Path, from: u64, seq: u64) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    let mut scratch = Vec::new();
    line::lines(&bytes[from..])
        .any(|(_, l)| check_line(l, &mut scratch).is_ok_and(|i| i.seq == seq))
}
