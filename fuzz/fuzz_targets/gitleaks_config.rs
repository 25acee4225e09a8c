//! The gitleaks config loader: a policy whose `[content] gitleaks_config` names a file
//! holding the fuzzer's bytes, loaded as start-up loads it (the file is written to a
//! temp directory each run). No panic; a loaded scanner scans a few texts.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use fsgate_base::path::RelPath;
use fsgate_policy::Policy;
use libfuzzer_sys::fuzz_target;

const POLICY: &str =
    "version = 1\n[content]\nbuiltin = false\ngitleaks_config = \"gitleaks.toml\"\n";
const TEXTS: [&[u8]; 3] = [
    b"",
    b"aws_access_key_id = AKIAIOSFODNN7EXAMPLE\npassword = \"hunter2-hunter2\"\n",
    b"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n\xff\xfe",
];

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        };
        tempfile::Builder::new()
            .prefix("fsgate-fuzz-gitleaks-")
            .tempdir_in(base)
            .expect("temp dir")
            .keep()
    })
}

fuzz_target!(|data: &[u8]| {
    // `[extend] path` is followed like gitleaks does; a path to a device or to the
    // kernel's files would only test the filesystem (the policy author chose it).
    let text = String::from_utf8_lossy(data);
    if ["/dev", "/proc", "/sys"].iter().any(|p| text.contains(p)) {
        return;
    }
    let dir = dir();
    std::fs::write(dir.join("gitleaks.toml"), data).expect("write config");
    let Ok(policy) = Policy::from_toml_in(POLICY, "fuzz", Some(dir)) else {
        return;
    };
    let Some(scanner) = policy.content_scanner() else {
        return;
    };
    let path = RelPath::parse_rooted("src/config.py").unwrap();
    for t in TEXTS {
        let _ = scanner.scan_all(&path, t);
        let _ = scanner.explain(&path, t);
    }
});
