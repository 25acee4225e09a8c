//! The backup store's trailer parser over arbitrary version files: no panic, no read or
//! allocation beyond the trailer and the bounded record whatever the length field says,
//! and a file it accepts has its content, record and 48-byte trailer adding up to the
//! file's length, with the record's size equal to the content's.
#![no_main]

use fsgate_backup::fuzz::version_trailer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((content, size, _record)) = version_trailer(data) {
        assert_eq!(content, size, "record size differs from the content");
        assert!(
            content + 48 <= data.len() as u64,
            "content past the trailer"
        );
    }
});
