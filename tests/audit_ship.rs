//! `[audit] ship` against a real rsyslog on loopback, started unprivileged by each test
//! with a configuration it writes: records reach it through `fsgate serve` (confined by
//! Landlock), survive rsyslog being stopped and started again mid-run and a gateway
//! restart (read back from rotated files), over plain TCP, TLS with a client
//! certificate and a local datagram socket; `fsgate audit import-syslog` rebuilds the
//! log from rsyslog's file and `fsgate audit verify` passes on it.
//!
//! Included from tests/all.rs as `mod audit_ship;` (uses `crate::common`).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Gate, canonical_tempdir, run_cli, skip_or_fail};

/// rsyslog's daemon: `FSGATE_RSYSLOGD`, else on PATH or in /usr/sbin.
fn rsyslogd(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("FSGATE_RSYSLOGD")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join("rsyslogd")),
        )
        .chain([PathBuf::from("/usr/sbin/rsyslogd")])
        .find(|p| p.is_file());
    if found.is_none() {
        skip_or_fail(test, "rsyslogd not found (apt-get install rsyslog)");
    }
    found
}

/// How rsyslog listens.
#[derive(Clone)]
enum Input {
    /// imtcp on a port, in the clear.
    Tcp,
    /// imtcp with the OpenSSL driver; client certificates required when `mutual`.
    Tls { certs: PathBuf, mutual: bool },
    /// imuxsock on a socket of its own (a stand-in for `/dev/log`).
    Socket,
}

/// One rsyslogd, writing every message as `PROCID MSGID MSG` to `out`.
struct Rsyslog {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    input: Input,
    child: Option<Child>,
    _tmp: tempfile::TempDir,
}

impl Rsyslog {
    fn start(bin: PathBuf, input: Input) -> Rsyslog {
        let (tmp, dir) = canonical_tempdir("fsgate-rsyslog-");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut r = Rsyslog {
            bin,
            dir,
            port,
            input,
            child: None,
            _tmp: tmp,
        };
        std::fs::write(r.dir.join("rsyslog.conf"), r.config()).expect("write rsyslog.conf");
        r.run();
        r
    }

    fn config(&self) -> String {
        let d = self.dir.display();
        // Records pass untouched: no control-character escaping, room for long records.
        let mut global = format!(
            "workDirectory=\"{d}\" maxMessageSize=\"64k\" parser.escapeControlCharactersOnReceive=\"off\""
        );
        let input = match &self.input {
            Input::Tcp => format!(
                "module(load=\"imtcp\")\ninput(type=\"imtcp\" address=\"127.0.0.1\" port=\"{}\")\n",
                self.port
            ),
            Input::Tls { certs, mutual } => {
                let c = certs.display();
                global.push_str(&format!(
                    " DefaultNetstreamDriver=\"ossl\" DefaultNetstreamDriverCAFile=\"{c}/ca.pem\" DefaultNetstreamDriverCertFile=\"{c}/server.pem\" DefaultNetstreamDriverKeyFile=\"{c}/server.key\""
                ));
                let auth = if *mutual { "x509/certvalid" } else { "anon" };
                format!(
                    "module(load=\"imtcp\" StreamDriver.Name=\"ossl\" StreamDriver.Mode=\"1\" StreamDriver.AuthMode=\"{auth}\")\ninput(type=\"imtcp\" address=\"127.0.0.1\" port=\"{}\")\n",
                    self.port
                )
            }
            Input::Socket => format!(
                "module(load=\"imuxsock\" SysSock.Use=\"off\")\ninput(type=\"imuxsock\" Socket=\"{d}/log\" RateLimit.Interval=\"0\")\n"
            ),
        };
        format!(
            "global({global})\n{input}template(name=\"raw\" type=\"string\" string=\"%procid% %msgid% %msg%\\n\")\n*.* action(type=\"omfile\" file=\"{d}/out.log\" template=\"raw\")\n"
        )
    }

    fn run(&mut self) {
        let child = Command::new(&self.bin)
            .arg("-n")
            .arg("-f")
            .arg(self.dir.join("rsyslog.conf"))
            .arg("-i")
            .arg(self.dir.join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn rsyslogd");
        self.child = Some(child);
        let ready = || match self.input {
            Input::Socket => self.socket().exists(),
            _ => TcpStream::connect(("127.0.0.1", self.port)).is_ok(),
        };
        assert!(
            wait_until(Duration::from_secs(10), ready),
            "rsyslogd did not start listening"
        );
    }

    /// Stops rsyslogd as a service manager would (SIGTERM) and waits for it.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pid = rustix::process::Pid::from_child(&c);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let _ = c.wait();
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("log")
    }

    fn out(&self) -> PathBuf {
        self.dir.join("out.log")
    }

    /// The seqs rsyslog wrote so far (with duplicates).
    fn seqs(&self) -> Vec<u64> {
        let text = std::fs::read_to_string(self.out()).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.find("{\"seq\":").map(|i| &l[i..]))
            .filter_map(|r| serde_json::from_str::<Value>(r).ok())
            .filter_map(|v| v["seq"].as_u64())
            .collect()
    }

    /// Waits until rsyslog wrote every seq up to `head`.
    fn wait_for(&self, head: u64) {
        let complete = || {
            let have: std::collections::BTreeSet<u64> = self.seqs().into_iter().collect();
            (1..=head).all(|s| have.contains(&s))
        };
        assert!(
            wait_until(Duration::from_secs(20), complete),
            "rsyslog did not receive seq 1..={head}; it has {:?}",
            self.seqs()
        );
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// The built-in default policy with `audit` appended to it.
fn policy(audit: &str) -> String {
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"),
    )
    .expect("read policies/default.toml");
    format!("{base}\n[audit]\n{audit}\n")
}

/// Writes `n` files through the gateway (two records each: intent and outcome).
fn write_files(gate: &Gate, from: usize, n: usize) {
    for i in from..from + n {
        gate.ok(
            "fs/write_text_file",
            json!({"path": gate.abs(&format!("f{i}.txt")), "content": format!("file {i}\n")}),
        );
    }
}

/// The log's records, parsed.
fn records(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The whole series' text, rotated files first.
fn series_text(log: &Path) -> String {
    let dir = log.parent().expect("log dir");
    let base = log
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read log dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.starts_with(&format!("{base}.0")))
        })
        .collect();
    rotated.sort();
    rotated.push(log.to_path_buf());
    rotated
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("read log file"))
        .collect()
}

/// `fsgate audit ship-status --json` on `log`: its one destination.
fn ship_status(log: &Path) -> Value {
    let out = run_cli(&[
        "audit",
        "ship-status",
        "--json",
        "--audit-log",
        &log.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("ship-status JSON");
    v[0]["destinations"][0].clone()
}

/// Rebuilds the log from rsyslog's file, verifies it against the local checkpoint and
/// checks it is the local log, byte for byte.
fn import_and_verify(rs: &Rsyslog, log: &Path) {
    let rebuilt = rs.dir.join("rebuilt.jsonl");
    let out = run_cli(&[
        "audit",
        "import-syslog",
        &rs.out().to_string_lossy(),
        "--out",
        &rebuilt.to_string_lossy(),
    ]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "import-syslog: {said}");
    let checkpoint = format!("{}.checkpoint", log.display());
    let verify = run_cli(&[
        "audit",
        "verify",
        &rebuilt.to_string_lossy(),
        "--checkpoint",
        &checkpoint,
    ]);
    assert_eq!(
        verify.status.code(),
        Some(0),
        "verify of rsyslog's copy: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let rebuilt_text = std::fs::read_to_string(&rebuilt).expect("read rebuilt log");
    assert!(
        rebuilt_text == series_text(log),
        "the rebuilt log differs from the gateway's"
    );
}

fn kinds(log: &Path) -> Vec<String> {
    records(log)
        .iter()
        .filter_map(|r| r["kind"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn records_reach_rsyslog_through_its_restart_and_verify_from_its_copy() {
    let test = "records_reach_rsyslog_through_its_restart_and_verify_from_its_copy";
    let Some(bin) = rsyslogd(test) else { return };
    let mut rs = Rsyslog::start(bin, Input::Tcp);
    let audit = format!(
        "ship = [{{ host = \"127.0.0.1\", port = {}, alert_behind = 20 }}]",
        rs.port
    );
    let mut gate = Gate::with_policy(&policy(&audit));
    write_files(&gate, 0, 15);
    let log = gate.audit_log.clone();
    rs.wait_for(records(&log).len() as u64);
    // Shipped from inside the gateway's own Landlock wall, which allows that port alone.
    let start = records(&log)
        .into_iter()
        .find(|r| r["details"]["sandbox"].is_object())
        .expect("the gateway's start record");
    let sandbox = &start["details"]["sandbox"];
    if sandbox["abi"].as_u64().is_some_and(|abi| abi >= 4) {
        let wanted = format!("connect to port {} only (audit collectors)", rs.port);
        assert!(
            sandbox["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&wanted)),
            "{sandbox}"
        );
    }

    // The collector goes away: requests are still answered at once, records wait.
    rs.stop();
    let t = Instant::now();
    write_files(&gate, 15, 30);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "requests slowed down: {:?}",
        t.elapsed()
    );
    assert!(
        wait_until(Duration::from_secs(10), || ship_status(&log)["state"]
            == "retrying"),
        "{}",
        ship_status(&log)
    );
    let down = ship_status(&log);
    assert!(down["behind"].as_u64().unwrap_or(0) > 20, "{down}");
    assert!(
        down["error"]
            .as_str()
            .is_some_and(|e| e.contains("connect")),
        "{down}"
    );
    assert!(wait_until(Duration::from_secs(5), || kinds(&log)
        .contains(&"ship-behind".into())));

    // It comes back: everything is shipped, and the gateway says it caught up, once.
    rs.run();
    write_files(&gate, 45, 10);
    assert!(
        wait_until(Duration::from_secs(30), || kinds(&log)
            .contains(&"ship-caught-up".into())),
        "no ship-caught-up record; status {}",
        ship_status(&log)
    );
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
    let k = kinds(&log);
    assert_eq!(k.iter().filter(|k| *k == "ship-behind").count(), 1, "{k:?}");
    assert_eq!(
        k.iter().filter(|k| *k == "ship-caught-up").count(),
        1,
        "{k:?}"
    );
    assert_eq!(k.last().map(String::as_str), Some("stop"));
    let head = records(&log).len() as u64;
    rs.wait_for(head);
    let after = ship_status(&log);
    assert_eq!(
        (after["shipped"].as_u64(), after["behind"].as_u64()),
        (Some(head), Some(0)),
        "{after}"
    );
    assert_eq!(after["state"], "stopped");
    import_and_verify(&rs, &log);
}

#[test]
fn a_gateway_restart_ships_from_rotated_files_what_the_last_run_could_not() {
    let test = "a_gateway_restart_ships_from_rotated_files_what_the_last_run_could_not";
    let Some(bin) = rsyslogd(test) else { return };
    let mut rs = Rsyslog::start(bin, Input::Tcp);
    rs.stop();
    // Small files: the log rotates several times while nothing can be shipped.
    let audit = format!(
        "max_file_bytes = 4096\nship = [{{ host = \"127.0.0.1\", port = {} }}]",
        rs.port
    );
    let mut gate = Gate::with_policy(&policy(&audit));
    write_files(&gate, 0, 40);
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
    let log = gate.audit_log.clone();
    let stopped = ship_status(&log);
    assert_eq!(stopped["shipped"], 0, "{stopped}");
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    let rotated = std::fs::read_dir(log.parent().expect("dir"))
        .expect("read dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("audit.jsonl.0"))
        .count();
    assert!(
        rotated >= 3,
        "the log did not rotate: {rotated} rotated files"
    );

    rs.run();
    let mut gate = Gate::relaunch(gate);
    write_files(&gate, 40, 5);
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
    let head = series_text(&log).lines().count() as u64;
    rs.wait_for(head);
    assert_eq!(ship_status(&log)["shipped"].as_u64(), Some(head));
    import_and_verify(&rs, &log);
}

#[test]
fn an_unreachable_collector_is_recorded_behind_and_caught_up_for_a_small_backlog() {
    let test = "an_unreachable_collector_is_recorded_behind_and_caught_up_for_a_small_backlog";
    let Some(bin) = rsyslogd(test) else { return };
    let mut rs = Rsyslog::start(bin, Input::Tcp);
    // Never reached while the records pile up: no send, no lost connection.
    rs.stop();
    let audit = format!(
        "ship = [{{ host = \"127.0.0.1\", port = {}, alert_behind = 20 }}]",
        rs.port
    );
    let mut gate = Gate::with_policy(&policy(&audit));
    // About 30 records: far under one 64 KiB batch once the collector is back.
    write_files(&gate, 0, 15);
    let log = gate.audit_log.clone();
    assert!(
        wait_until(Duration::from_secs(10), || kinds(&log)
            .contains(&"ship-behind".into())),
        "no ship-behind record while the collector is unreachable; status {}",
        ship_status(&log)
    );
    let behind = records(&log)
        .into_iter()
        .find(|r| r["kind"] == "ship-behind")
        .expect("the ship-behind record");
    assert_eq!(behind["details"]["limit"], 20, "{behind}");
    assert_eq!(behind["details"]["shipped"], 0, "{behind}");
    assert!(
        behind["details"]["behind"].as_u64().unwrap_or(0) > 20,
        "{behind}"
    );

    rs.run();
    assert!(
        wait_until(Duration::from_secs(45), || kinds(&log)
            .contains(&"ship-caught-up".into())),
        "no ship-caught-up record; status {}",
        ship_status(&log)
    );
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
    let k = kinds(&log);
    assert_eq!(k.iter().filter(|k| *k == "ship-behind").count(), 1, "{k:?}");
    assert_eq!(
        k.iter().filter(|k| *k == "ship-caught-up").count(),
        1,
        "{k:?}"
    );
    let head = records(&log).len() as u64;
    rs.wait_for(head);
    import_and_verify(&rs, &log);
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, by `openssl`.
fn make_certs(dir: &Path) -> bool {
    let sh = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let key = |name: &str, subj: &str| {
        sh(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subj,
        ])
    };
    let sign = |name: &str, ext: &str| {
        std::fs::write(dir.join(format!("{name}.ext")), ext).is_ok()
            && sh(&[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &format!("{name}.pem"),
                "-extfile",
                &format!("{name}.ext"),
            ])
    };
    sh(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=fsgate test CA",
    ]) && key("server", "/CN=localhost")
        && sign("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        && key("client", "/CN=fsgate gateway")
        && key("other", "/CN=another CA")
        && sign("client", "extendedKeyUsage=clientAuth\n")
        && sh(&[
            "req",
            "-x509",
            "-key",
            "other.key",
            "-out",
            "other-ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=another CA",
        ])
}

/// rsyslog's OpenSSL network driver, from the rsyslog-openssl package.
fn has_ossl_driver() -> bool {
    [
        "/usr/lib/x86_64-linux-gnu/rsyslog",
        "/usr/lib/aarch64-linux-gnu/rsyslog",
        "/usr/lib/rsyslog",
    ]
    .iter()
    .any(|d| Path::new(d).join("lmnsd_ossl.so").exists())
}

#[test]
fn tls_to_rsyslog_with_a_client_certificate_and_only_with_the_right_ca() {
    let test = "tls_to_rsyslog_with_a_client_certificate_and_only_with_the_right_ca";
    let Some(bin) = rsyslogd(test) else { return };
    if !has_ossl_driver() {
        return skip_or_fail(
            test,
            "rsyslog's TLS driver is missing (apt-get install rsyslog-openssl)",
        );
    }
    let (_certs_tmp, certs) = canonical_tempdir("fsgate-certs-");
    if !make_certs(&certs) {
        return skip_or_fail(test, "openssl could not make the test certificates");
    }
    let rs = Rsyslog::start(
        bin,
        Input::Tls {
            certs: certs.clone(),
            mutual: true,
        },
    );
    let c = certs.display();
    let audit = format!(
        "ship = [{{ host = \"127.0.0.1\", port = {}, tls_ca = \"{c}/ca.pem\", tls_cert = \"{c}/client.pem\", tls_key = \"{c}/client.key\", facility = \"local4\", app_name = \"fsgate-tls\" }}]",
        rs.port
    );
    let mut gate = Gate::with_policy(&policy(&audit));
    write_files(&gate, 0, 10);
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
    let log = gate.audit_log.clone();
    rs.wait_for(records(&log).len() as u64);
    import_and_verify(&rs, &log);

    // A collector whose certificate the configured CA did not sign gets nothing.
    let wrong = format!(
        "ship = [{{ host = \"127.0.0.1\", port = {}, tls_ca = \"{c}/other-ca.pem\" }}]",
        rs.port
    );
    let before = rs.seqs().len();
    let mut gate = Gate::with_policy(&policy(&wrong));
    write_files(&gate, 0, 3);
    let log = gate.audit_log.clone();
    assert!(
        wait_until(Duration::from_secs(10), || ship_status(&log)["error"]
            .as_str()
            .is_some_and(|e| e.contains("certificate"))),
        "{}",
        ship_status(&log)
    );
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
    assert_eq!(
        rs.seqs().len(),
        before,
        "records reached an unverified collector"
    );
    assert_eq!(ship_status(&log)["shipped"], 0);
}

#[test]
fn a_local_syslog_socket_gets_every_record_as_syslog3_sends_it() {
    let test = "a_local_syslog_socket_gets_every_record_as_syslog3_sends_it";
    let Some(bin) = rsyslogd(test) else { return };
    let rs = Rsyslog::start(bin, Input::Socket);
    let audit = format!("ship = [{{ socket = \"{}\" }}]", rs.socket().display());
    let mut gate = Gate::with_policy(&policy(&audit));
    write_files(&gate, 0, 10);
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
    let log = gate.audit_log.clone();
    rs.wait_for(records(&log).len() as u64);
    import_and_verify(&rs, &log);
}

#[test]
fn policy_check_refuses_unusable_ship_entries() {
    let (_tmp, dir) = canonical_tempdir("fsgate-ship-policy-");
    let cases = [
        ("ship = [{ host = \"127.0.0.1\" }]", "host needs a port"),
        (
            "ship = [{ host = \"h\", port = 514, protocol = \"udp\" }]",
            "unknown field",
        ),
        (
            "ship = [{ socket = \"/dev/log\", tls_ca = \"/ca.pem\" }]",
            "not a socket",
        ),
        (
            "ship = [{ host = \"h\", port = 514, facility = \"local9\" }]",
            "local9",
        ),
    ];
    for (i, (entry, said)) in cases.iter().enumerate() {
        let file = dir.join(format!("p{i}.toml"));
        std::fs::write(&file, policy(entry)).expect("write policy");
        let out = run_cli(&["policy", "check", &file.to_string_lossy()]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{entry}: {text}");
        assert!(text.contains(said), "{entry}: {text}");
    }
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        policy("ship = [{ host = \"127.0.0.1\", port = 514 }, { socket = \"/dev/log\" }]"),
    )
    .expect("write policy");
    let out = run_cli(&["policy", "check", &good.to_string_lossy()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `policy check` on `policy` (written to `dir/name`): its exit code and what it said.
fn check_policy(dir: &Path, name: &str, policy: &str) -> (Option<i32>, String) {
    let file = dir.join(name);
    std::fs::write(&file, policy).expect("write policy");
    let out = run_cli(&["policy", "check", &file.to_string_lossy()]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), said)
}

/// Whether `fsgate serve` starts with the policy file (stdin closed: it ends at once
/// when it started).
fn serve_starts(dir: &Path, name: &str) -> bool {
    let ws = dir.join(format!("{name}.ws"));
    std::fs::create_dir_all(&ws).expect("workspace dir");
    let out = run_cli(&[
        "serve",
        "--workspace",
        &ws.to_string_lossy(),
        "--policy",
        &dir.join(name).to_string_lossy(),
        "--audit-log",
        &dir.join(format!("{name}.audit.jsonl")).to_string_lossy(),
        "--backup-dir",
        &dir.join(format!("{name}.backups")).to_string_lossy(),
    ]);
    out.status.success()
}

#[test]
fn policy_check_refuses_the_tls_files_serve_refuses() {
    let test = "policy_check_refuses_the_tls_files_serve_refuses";
    let (_tmp, dir) = canonical_tempdir("fsgate-ship-tls-check-");
    if !make_certs(&dir) {
        return skip_or_fail(test, "openssl could not make the test certificates");
    }
    std::fs::write(dir.join("empty.pem"), "").expect("write empty file");
    let entry = |ca: &str, cert: &str, key: &str| {
        policy(&format!(
            "ship = [{{ host = \"127.0.0.1\", port = 6514, tls_ca = \"{ca}\", tls_cert = \"{cert}\", tls_key = \"{key}\" }}]"
        ))
    };
    let cases = [
        (
            "missing CA",
            entry("missing.pem", "client.pem", "client.key"),
            "tls_ca",
        ),
        (
            "empty CA",
            entry("empty.pem", "client.pem", "client.key"),
            "tls_ca",
        ),
        (
            "a key as CA",
            entry("ca.key", "client.pem", "client.key"),
            "tls_ca",
        ),
        (
            "missing certificate",
            entry("ca.pem", "missing.pem", "client.key"),
            "tls_cert",
        ),
        (
            "empty key",
            entry("ca.pem", "client.pem", "empty.pem"),
            "tls_key",
        ),
        (
            "mismatched cert and key",
            entry("ca.pem", "client.pem", "other.key"),
            "tls_",
        ),
    ];
    for (i, (what, text, said)) in cases.iter().enumerate() {
        let name = format!("bad{i}.toml");
        let (code, out) = check_policy(&dir, &name, text);
        assert_eq!(code, Some(2), "{what}: policy check passed it: {out}");
        assert!(out.contains(said), "{what}: {out}");
        // The same files stop serve: the check refused nothing serve would use.
        assert!(!serve_starts(&dir, &name), "{what}: serve started with it");
    }
    let good = entry("ca.pem", "client.pem", "client.key");
    let (code, out) = check_policy(&dir, "good.toml", &good);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        serve_starts(&dir, "good.toml"),
        "serve refused usable TLS files"
    );
}

#[test]
fn a_shipping_tls_key_in_the_workspace_is_refused_by_its_own_name() {
    let test = "a_shipping_tls_key_in_the_workspace_is_refused_by_its_own_name";
    let (_certs_tmp, certs) = canonical_tempdir("fsgate-certs-");
    if !make_certs(&certs) {
        return skip_or_fail(test, "openssl could not make the test certificates");
    }
    let key = std::fs::read_to_string(certs.join("client.key")).expect("read client key");
    let c = certs.display();
    let audit = format!(
        "ship = [{{ host = \"127.0.0.1\", port = 6514, tls_ca = \"{c}/ca.pem\", tls_cert = \"{c}/client.pem\", tls_key = \"{{ROOT}}/conf/gw-client\" }}]"
    );
    let mut gate = Gate::with_policy_and_files(&policy(&audit), &[("conf/gw-client", &key)]);
    let err = gate
        .call(
            "fs/read_text_file",
            json!({"path": gate.abs("conf/gw-client")}),
        )
        .expect_err("the shipping TLS key was read");
    let data = err.data.clone().unwrap_or_default();
    let reason = data["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("shipping TLS key"), "{err:?}");
    assert!(!reason.contains("audit log"), "{err:?}");
    assert_eq!(data["rule"], "floor:audit-ship-key", "{err:?}");
    gate.close_stdin();
    assert!(gate.wait_exit(Duration::from_secs(20)).success());
}
