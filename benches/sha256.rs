//! SHA-256 of 10 MiB, the hashing of a `read_big` read: `sha2` 0.11 against fsgate's
//! hasher (fsgate-base `sha256.rs`, ring), each with what it picks on this CPU (SHA-NI
//! where the CPU has it); and ring's AVX and SSSE3 code, which ring picks on a CPU
//! without SHA-NI (AVX on Intel, SSSE3 elsewhere), called directly so that a machine
//! with SHA-NI can measure them. ring reads the CPU's features itself (no environment
//! variable masks them), hence the direct calls. `sha2`'s portable code, its only other
//! x86 path, is chosen at compile time (`--cfg sha2_backend="soft"`): not measured here.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsgate_base::sha256::Sha256;

const LEN: usize = 10 << 20;

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

type BlockFn = unsafe extern "C" fn(*mut [u32; 8], *const [u8; 64], usize);

// ring's assembly (OpenSSL's sha256-x86_64.pl), under the symbol prefix of the ring
// version in Cargo.lock: a ring upgrade renames them and this file must follow.
#[allow(unsafe_code)]
unsafe extern "C" {
    fn ring_core_0_17_14__sha256_block_data_order_avx(
        s: *mut [u32; 8],
        d: *const [u8; 64],
        n: usize,
    );
    fn ring_core_0_17_14__sha256_block_data_order_ssse3(
        s: *mut [u32; 8],
        d: *const [u8; 64],
        n: usize,
    );
}

/// The compression of `data`'s whole blocks by one of ring's block functions (no
/// padding: the work of hashing `data`, not its digest).
#[allow(unsafe_code)]
fn blocks(f: BlockFn, data: &[u8]) -> [u32; 8] {
    let (whole, _) = data.as_chunks::<64>();
    let mut state = IV;
    // SAFETY: `whole` is `whole.len()` readable 64-byte blocks and `state` eight words,
    // what the function reads and writes; the caller checked the CPU has its features.
    unsafe { f(&mut state, whole.as_ptr(), whole.len()) };
    state
}

fn sha256(c: &mut Criterion) {
    let data: Vec<u8> = (0..LEN).map(|i| (i * 31 % 251) as u8).collect();
    assert_eq!(
        Sha256::digest(&data)[..],
        <sha2::Sha256 as sha2::Digest>::digest(&data)[..]
    );
    let mut g = c.benchmark_group("sha256_10m");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(10);
    g.bench_function("sha2", |b| {
        b.iter(|| <sha2::Sha256 as sha2::Digest>::digest(black_box(&data)))
    });
    g.bench_function("fsgate_hasher", |b| {
        b.iter(|| Sha256::digest(black_box(&data)))
    });
    let avx: BlockFn = ring_core_0_17_14__sha256_block_data_order_avx;
    let ssse3: BlockFn = ring_core_0_17_14__sha256_block_data_order_ssse3;
    if std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("ssse3") {
        // Each gives sha2's compression of the same blocks.
        let mut want = IV;
        sha2::block_api::compress256(&mut want, data[..4096].as_chunks::<64>().0);
        assert_eq!(blocks(avx, &data[..4096]), want);
        assert_eq!(blocks(ssse3, &data[..4096]), want);
        g.bench_function("ring_avx_no_sha_ni", |b| {
            b.iter(|| blocks(avx, black_box(&data)))
        });
        g.bench_function("ring_ssse3_no_sha_ni", |b| {
            b.iter(|| blocks(ssse3, black_box(&data)))
        });
    }
    g.finish();
}

criterion_group!(benches, sha256);
criterion_main!(benches);
