//! Tests of the sparse copy: holes stay holes, the hash is the full content's, caps hold.

use std::io::{Seek, SeekFrom as StdSeek, Write};
use std::os::unix::fs::MetadataExt;

use proptest::prelude::*;

use super::*;

const NO_CAPS: Caps = Caps {
    data: u64::MAX,
    len: u64::MAX,
};

/// A file of apparent length `len` holding `chunks` (offset, bytes), holes elsewhere.
fn sparse_file(dir: &tempfile::TempDir, len: u64, chunks: &[(u64, Vec<u8>)]) -> std::fs::File {
    let path = dir.path().join("src");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .expect("create source");
    f.set_len(len).expect("set_len");
    for (off, bytes) in chunks {
        f.seek(StdSeek::Start(*off)).expect("seek");
        f.write_all(bytes).expect("write");
    }
    f.sync_all().expect("sync");
    f
}

fn full_content(len: u64, chunks: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut v = vec![0u8; usize::try_from(len).expect("small")];
    for (off, bytes) in chunks {
        let o = usize::try_from(*off).expect("small");
        let end = (o + bytes.len()).min(v.len());
        v[o..end].copy_from_slice(&bytes[..end - o]);
    }
    if v.len() < usize::try_from(len).expect("small") {
        v.resize(usize::try_from(len).expect("small"), 0);
    }
    v
}

fn empty_dst(dir: &tempfile::TempDir) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(dir.path().join("dst"))
        .expect("create copy")
}

#[test]
fn a_large_hole_is_not_copied_and_hashes_as_zeros() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 256 << 20; // 256 MiB apparent, a few bytes of data
    let chunks = vec![(len / 2, b"needle".to_vec())];
    let src = sparse_file(&dir, len, &chunks);
    let dst = empty_dst(&dir);
    let copied = clone_or_copy(&src, &dst, NO_CAPS).expect("copy");
    assert_eq!(copied.size, len);
    assert!(copied.stored <= 1 << 20, "stored {} bytes", copied.stored);
    let meta = dst.metadata().expect("stat copy");
    assert_eq!(meta.len(), len);
    assert!(
        meta.blocks() * 512 <= 1 << 20,
        "copy allocates {} blocks",
        meta.blocks()
    );
    let want = hex::encode(Sha256::digest(full_content(len, &chunks)));
    assert_eq!(copied.sha256, want);
    let back = std::fs::read(dir.path().join("dst")).expect("read copy");
    assert_eq!(hex::encode(Sha256::digest(&back)), want);
}

#[test]
fn caps_refuse_before_copying_and_stop_a_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chunks = vec![(0, vec![7u8; 300_000])];
    let src = sparse_file(&dir, 300_000, &chunks);
    let dst = empty_dst(&dir);
    let caps = Caps {
        data: 100_000,
        len: u64::MAX,
    };
    match clone_or_copy(&src, &dst, caps) {
        Err(CopyError::Limit { data: true, seen }) => assert!(seen > 100_000),
        other => panic!("expected the data cap: {other:?}"),
    }
    assert_eq!(dst.metadata().expect("stat").len(), 0, "nothing copied");
    // The walk itself stops at the cap (a file that grew after the first check).
    match walk(&src, Some(dst.as_fd()), caps) {
        Err(CopyError::Limit { data: true, .. }) => {}
        other => panic!("expected the data cap: {other:?}"),
    }
    assert!(dst.metadata().expect("stat").len() <= 100_000);
    let len_cap = Caps {
        data: u64::MAX,
        len: 1000,
    };
    assert!(matches!(
        clone_or_copy(&src, empty_dst_named(&dir, "d2"), len_cap),
        Err(CopyError::Limit { data: false, .. })
    ));
}

fn empty_dst_named(dir: &tempfile::TempDir, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(dir.path().join(name))
        .expect("create copy")
}

#[test]
fn zeros_hash_like_real_zeros() {
    for n in [0u64, 1, 65_535, 65_536, 65_537, 300_001] {
        let mut h = Sha256::new();
        hash_zeros(&mut h, n);
        let want = Sha256::digest(vec![0u8; usize::try_from(n).expect("small")]);
        assert_eq!(h.finalize(), want, "{n} zeros");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn any_layout_copies_exactly(
        len in 0u64..(1 << 21),
        raw in proptest::collection::vec((0u64..(1 << 21), proptest::collection::vec(any::<u8>(), 1..9000)), 0..6),
    ) {
        let chunks: Vec<(u64, Vec<u8>)> = raw.into_iter().filter(|(o, _)| *o < len.max(1)).collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let src = sparse_file(&dir, len, &chunks);
        let real_len = src.metadata().expect("stat").len();
        let dst = empty_dst(&dir);
        let copied = clone_or_copy(&src, &dst, NO_CAPS).expect("copy");
        let want = full_content(real_len, &chunks);
        prop_assert_eq!(copied.size, real_len);
        prop_assert_eq!(&copied.sha256, &hex::encode(Sha256::digest(&want)));
        let back = std::fs::read(dir.path().join("dst")).expect("read copy");
        prop_assert!(back == want, "copy differs from the source");
        prop_assert!(dst.metadata().expect("stat").blocks() <= src.metadata().expect("stat").blocks() + 8);
    }
}

/// A file whose blocks cover it is read straight through (no extent walk) and copied
/// exactly; a device remembered as unable to clone is copied, never cloned, and the
/// copy is still exact.
#[test]
fn dense_files_and_remembered_no_clone_copy_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 2 * CHUNK as u64 + 5;
    let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let src = sparse_file(&dir, len, &[(0, bytes.clone())]);
    let st = sizes(&src).expect("stat");
    assert!(st.dense(), "{st:?}");
    let no_clone = NoClone::default();
    no_clone.note(st.dev);
    for name in ["d1", "d2"] {
        let dst = empty_dst_named(&dir, name);
        let copied = copy_sized(&src, st, &dst, NO_CAPS, &no_clone).expect("copy");
        assert_eq!(copied.size, len);
        assert_eq!(copied.stored, len);
        assert_eq!(copied.sha256, hex::encode(Sha256::digest(&bytes)));
        assert_eq!(std::fs::read(dir.path().join(name)).expect("read"), bytes);
    }
    assert!(no_clone.knows(st.dev));
}

/// A clone that fails because the filesystems cannot clone is remembered for the
/// source's device (where they can, the clone is used and nothing is remembered);
/// either way the copy is exact.
#[test]
fn a_filesystem_that_cannot_clone_is_remembered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = sparse_file(&dir, 6, &[(0, b"abcdef".to_vec())]);
    let st = sizes(&src).expect("stat");
    let dst = empty_dst(&dir);
    let no_clone = NoClone::default();
    let cannot =
        rustix::fs::ioctl_ficlone(empty_dst_named(&dir, "probe"), &src).is_err_and(never_clones);
    let copied = copy_sized(&src, st, &dst, NO_CAPS, &no_clone).expect("copy");
    assert_eq!(copied.sha256, hex::encode(Sha256::digest(b"abcdef")));
    assert_eq!(
        std::fs::read(dir.path().join("dst")).expect("read"),
        b"abcdef"
    );
    assert_eq!(no_clone.knows(st.dev), cannot);
}

/// A copy of a file ending in a hole has the file's length (the hole is not written).
#[test]
fn a_trailing_hole_keeps_the_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let len = 1 << 20;
    let src = sparse_file(&dir, len, &[(0, b"head".to_vec())]);
    let dst = empty_dst(&dir);
    let copied = clone_or_copy(&src, &dst, NO_CAPS).expect("copy");
    assert_eq!(copied.size, len);
    assert_eq!(dst.metadata().expect("stat").len(), len);
    let want = full_content(len, &[(0, b"head".to_vec())]);
    assert_eq!(copied.sha256, hex::encode(Sha256::digest(&want)));
}
