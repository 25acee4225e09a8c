//! `fsgate audit report --html`: the page, rendered by a real headless Chromium, shows
//! the verdict first, holds every hostile name an agent chose as inert, escaped text,
//! and loads nothing: no request leaves it and its Content-Security-Policy is never
//! violated (not even by its own style sheet). A tampered log is reported as such, with
//! where it breaks. Set FSGATE_REPORT_SCREENSHOT=FILE to keep the screenshot (that is
//! how docs/audit-report.png is made).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::{Gate, TIMEOUT, run_cli, skip_or_fail};

/// A file name an agent might choose: markup, quotes, a screen clear, a newline that
/// would forge a line, and a bidi override (`<RLO>gnp.sh` reads as `hs.png`).
const NAME: &str = "notes \"q\" 'a' <script>alert(1)<b>x\u{1b}[2J\nFORGED \u{202e}gnp.sh";
/// How [`NAME`] reads in the page's text.
const NAME_SHOWN: &str = "notes \"q\" 'a' <script>alert(1)<b>x\\u{1b}[2J\\nFORGED \\u{202e}gnp.sh";
/// A name the default policy refuses (`.env.*`), as hostile.
const REFUSED_NAME: &str = ".env.<b onmouseover=alert(1)>\u{1b}]8;;mailto:a@b\u{7}link";
/// A session id that would load a remote image, style sheet and script if it were markup.
const SESSION: &str = "s\"><img src=\"http://fsgate-canary.invalid/i.png\"><link rel=\"stylesheet\" href=\"http://fsgate-canary.invalid/c.css\"><script src=\"http://fsgate-canary.invalid/s.js\"></script>";

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A gateway after a demo-like session: reads, a new file, an overwrite, an edit, a
/// rename, a removal, two refusals, and a hostile name written and refused.
fn demo_log() -> Gate {
    let g = Gate::start();
    g.put("src/main.rs", "fn main() {}\n");
    g.put("README.md", "# demo\n");
    g.put(".env", "API_KEY=do-not-leak\n");
    g.put(NAME, "old\n");
    let sid = |p: Value| {
        let mut p = p;
        p["sessionId"] = json!("demo");
        p
    };
    g.ok("initialize", json!({"protocolVersion": 1}));
    g.ok(
        "fs/read_text_file",
        sid(json!({"path": g.abs("src/main.rs")})),
    );
    let todo = json!({"path": g.abs("notes/todo.md"), "content": "- try fsgate\n"});
    g.ok("fs/write_text_file", sid(todo));
    let main = json!({"path": g.abs("src/main.rs"), "content": "fn main() { run(); }\n"});
    g.ok("fs/write_text_file", sid(main));
    let edit = json!({"path": g.abs("README.md"), "oldText": "demo", "newText": "fsgate demo"});
    g.ok("_fsgate/edit_text_file", sid(edit));
    let rename = json!({"oldPath": g.abs("notes/todo.md"), "newPath": g.abs("TODO.md")});
    g.ok("_fsgate/rename", sid(rename));
    assert!(
        g.call("fs/read_text_file", sid(json!({"path": g.abs(".env")})))
            .is_err()
    );
    let passwd = format!("{}/../../etc/passwd", s(&g.root));
    assert!(
        g.call("fs/read_text_file", sid(json!({"path": passwd})))
            .is_err()
    );
    g.ok("_fsgate/rm", sid(json!({"path": g.abs("TODO.md")})));
    let hostile = json!({"sessionId": SESSION, "path": g.abs(NAME), "content": "new\n"});
    g.ok("fs/write_text_file", hostile);
    let refused = json!({"sessionId": SESSION, "path": g.abs(REFUSED_NAME)});
    assert!(g.call("fs/read_text_file", refused).is_err());
    g
}

fn stopped(mut g: Gate) -> Gate {
    g.close_stdin();
    let status = g.wait_exit(TIMEOUT);
    assert_eq!(status.code(), Some(0), "{}", g.stderr());
    g.join_readers();
    g
}

/// Runs `fsgate audit report` on the gateway's log; returns its exit code and the page.
fn report(g: &Gate, out: &Path) -> (Option<i32>, String) {
    let log_dir = g.audit_log.parent().expect("log dir");
    let o = run_cli(&["audit", "report", s(log_dir), "--html", s(out)]);
    let page = std::fs::read_to_string(out).unwrap_or_else(|e| {
        panic!(
            "no report written ({e}): {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), page)
}

/// The page as written: self-contained, and every hostile text escaped.
fn assert_self_contained(page: &str) {
    let lower = page.to_ascii_lowercase();
    // Quotes and `<` from a record are written as entities, so these are markup only.
    for bad in [
        "<script", "<img", "<link", "<iframe", "<object", "url(", "@import", " src=\"", " href=\"",
    ] {
        assert!(!lower.contains(bad), "the page holds {bad:?}");
    }
    assert!(
        page.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'sha256-"),
        "no strict CSP"
    );
    let raw: Vec<char> = page
        .chars()
        .filter(|c| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c))
        .collect();
    assert!(raw.is_empty(), "raw controls in the page: {raw:?}");
}

/// Where Chromium is: $FSGATE_CHROMIUM, or the names distributions give it.
fn chromium() -> Option<PathBuf> {
    let candidates = std::env::var_os("FSGATE_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["chromium", "chromium-browser", "google-chrome"].map(PathBuf::from));
    candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// What Chromium made of the page.
struct Rendered {
    dom: String,
    console: String,
    netlog: Value,
    png: Vec<u8>,
}

/// Renders `page` with headless Chromium: the DOM, a screenshot, the console (where
/// CSP violations are reported) and a log of every network request.
fn render(browser: &Path, page: &Path, work: &Path) -> Rendered {
    let (netlog, png) = (work.join("net.json"), work.join("shot.png"));
    let url = format!("file://{}", s(page));
    let base = |extra: &[String]| -> Output {
        let mut cmd = Command::new(browser);
        // Containers often lack the namespaces Chromium's sandbox needs; the page is
        // ours, and it runs no script.
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .args([
            "--disable-sync",
            "--disable-extensions",
            "--enable-logging=stderr",
        ])
        // Nothing may be fetched, and nothing could be if something tried.
        .arg("--host-resolver-rules=MAP * ~NOTFOUND")
        .arg(format!("--user-data-dir={}", s(&work.join("profile"))))
        .args(extra)
        .arg(&url);
        run_browser(cmd)
    };
    let dumped = base(&[
        "--dump-dom".into(),
        format!("--log-net-log={}", s(&netlog)),
        "--net-log-capture-mode=Everything".into(),
    ]);
    assert!(dumped.status.success(), "chromium --dump-dom failed");
    let shot = base(&[
        format!("--screenshot={}", s(&png)),
        "--window-size=1280,3000".into(),
        "--hide-scrollbars".into(),
    ]);
    assert!(shot.status.success(), "chromium --screenshot failed");
    let net = std::fs::read_to_string(&netlog).expect("chromium wrote its net log");
    Rendered {
        dom: String::from_utf8_lossy(&dumped.stdout).into_owned(),
        console: String::from_utf8_lossy(&dumped.stderr).into_owned(),
        netlog: serde_json::from_str(&net).expect("the net log is JSON"),
        png: std::fs::read(&png).expect("chromium wrote the screenshot"),
    }
}

/// Runs a browser to completion; kills it and fails if it hangs.
fn run_browser(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chromium");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("chromium output")
}

/// The URLs of requests the page started (Chromium's own background requests carry
/// no origin; the page's carry its `file://` origin).
fn page_requests(netlog: &Value) -> Vec<String> {
    let types = &netlog["constants"]["logEventTypes"];
    let start = types["URL_REQUEST_START_JOB"].as_i64().expect("event type");
    netlog["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"].as_i64() == Some(start))
        .map(|e| &e["params"])
        // The event's end carries only the result.
        .filter(|p| p.get("url").is_some())
        .filter(|p| {
            p["initiator"].as_str() != Some("not an origin")
                || p["network_isolation_key"]
                    .as_str()
                    .is_some_and(|k| k.contains("file://"))
        })
        .map(|p| p["url"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Text as `--dump-dom` serialises it inside an element.
fn as_dom_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn assert_inert(r: &Rendered) {
    let lower = r.dom.to_ascii_lowercase();
    for tag in ["<script", "<img", "<link"] {
        assert!(!lower.contains(tag), "the DOM holds a {tag} element");
    }
    assert!(
        r.dom.contains(&as_dom_text(NAME_SHOWN)),
        "the hostile name is not shown as escaped text"
    );
    assert!(
        r.dom.contains(&as_dom_text(SESSION)),
        "the hostile session is not shown as text"
    );
    assert!(
        !r.console.contains("Content Security Policy"),
        "a CSP violation:\n{}",
        r.console
    );
    let requests = page_requests(&r.netlog);
    assert!(requests.is_empty(), "the page made requests: {requests:?}");
    assert!(
        !serde_json::to_string(&r.netlog)
            .unwrap_or_default()
            .contains("fsgate-canary"),
        "the canary host was looked up"
    );
    assert_eq!(&r.png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&r.png[16..20], &1280u32.to_be_bytes(), "screenshot width");
}

#[test]
fn report_renders_in_chromium_inert_and_offline() {
    let Some(browser) = chromium() else {
        return skip_or_fail(
            "report_renders_in_chromium_inert_and_offline",
            "no Chromium (apt-get install chromium, or set FSGATE_CHROMIUM)",
        );
    };
    let g = stopped(demo_log());
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("report.html");
    let (code, page) = report(&g, &out);
    assert_eq!(code, Some(0), "an intact log exits 0");
    assert_self_contained(&page);
    let r = render(&browser, &out, work.path());
    assert!(
        r.dom
            .contains("Verification: <span class=\"word\">INTACT</span>"),
        "no verdict in the DOM"
    );
    let verdict_at = r.dom.find("id=\"verdict\"").expect("verdict section");
    for later in ["id=\"period\"", "id=\"sessions\"", "id=\"changes\""] {
        assert!(
            r.dom.find(later).expect(later) > verdict_at,
            "{later} before the verdict"
        );
    }
    assert_inert(&r);
    if let Some(keep) = std::env::var_os("FSGATE_REPORT_SCREENSHOT") {
        std::fs::write(&keep, &r.png).expect("write the screenshot");
    }
}

/// The change row of the hostile file names the hashes of both contents, and a backup
/// that exists and holds the old content.
#[test]
fn report_lists_each_change_with_hashes_and_backup() {
    let g = stopped(demo_log());
    let work = tempfile::tempdir().expect("tempdir");
    let (code, page) = report(&g, &work.path().join("r.html"));
    assert_eq!(code, Some(0));
    let section = &page[page.find("id=\"changes\"").expect("changes")..];
    let file = section
        .find(&format!("<code>{}</code>", html_text(NAME_SHOWN)))
        .expect("the hostile file has its own table");
    let table = &section[file..];
    let body = &table[table.find("<tbody>").expect("tbody")..];
    let row = &body[..body.find("</tr>").expect("row")];
    assert!(row.contains(&sha256_hex(b"new\n")), "new hash: {row}");
    assert!(row.contains(&sha256_hex(b"old\n")), "old hash: {row}");
    let backup = row
        .rsplit("<td class=\"h\">")
        .next()
        .and_then(|c| c.split("</td>").next())
        .expect("backup cell");
    let file = crate::backup_gateway::version_file(&g.state.join("backups"), backup)
        .unwrap_or_else(|| panic!("no version file for {backup}"));
    let bytes = std::fs::read(&file).expect("read the version");
    let (data, _) = crate::backup_gateway::split_version(&bytes);
    assert_eq!(data, &b"old\n"[..], "{backup}");
    // The rename shows under both names, and the refusals under their rules.
    for text in [
        "rename to <code>TODO.md</code>",
        "rename from <code>notes/todo.md</code>",
    ] {
        assert!(section.contains(text), "{text}");
    }
    for rule in ["secrets:dotenv", "workspace-boundary"] {
        assert!(
            page.contains(&format!("<td><code>{rule}</code></td>")),
            "{rule}"
        );
    }
}

/// What the agents read: per file and per session (reads, bytes, first and last time),
/// and the reads refused because the file is a secret (by name, by content) listed
/// apart, not among the reads.
#[test]
fn report_lists_what_was_read_per_file_and_session_and_secrets_apart() {
    let g = Gate::start();
    g.put("src/lib.rs", "pub fn f() {}\n");
    g.put("README.md", "# readme\n");
    g.put(".env", "API_KEY=do-not-leak\n");
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    g.put("config/keys.txt", format!("aws = {key}\n"));
    let read = |session: &str, rel: &str| json!({"sessionId": session, "path": g.abs(rel)});
    for (session, rel) in [
        ("s1", "src/lib.rs"),
        ("s1", "src/lib.rs"),
        ("s2", "src/lib.rs"),
        ("s2", "README.md"),
    ] {
        g.ok("fs/read_text_file", read(session, rel));
    }
    for rel in [".env", "config/keys.txt"] {
        assert!(
            g.call("fs/read_text_file", read("s2", rel)).is_err(),
            "{rel}"
        );
    }
    let g = stopped(g);
    let work = tempfile::tempdir().expect("tempdir");
    let (code, page) = report(&g, &work.path().join("r.html"));
    assert_eq!(code, Some(0));
    let at = page
        .find("<section id=\"reads\">")
        .expect("a section of reads");
    let section = &page[at..at + page[at..].find("</section>").expect("end")];
    assert!(
        section.contains("What was read (4 reads of 2 files)"),
        "{section}"
    );
    // One row: its cells' text, markup dropped.
    let row = |table: &str, key: &str| -> Vec<String> {
        let t = &section[section.find(&format!("<h3>By {table}</h3>")).expect(table)..];
        let r = &t[t
            .find(&format!("<code>{key}</code>"))
            .unwrap_or_else(|| panic!("{key}"))..];
        r[..r.find("</tr>").expect("row")]
            .split("<td")
            .map(without_tags)
            .collect()
    };
    let lib = row("file", "src/lib.rs");
    assert_eq!((lib[1].as_str(), lib[2].as_str()), ("3", "42"), "{lib:?}");
    assert!(lib[3] < lib[4], "first before last: {lib:?}");
    let readme = row("file", "README.md");
    assert_eq!(
        (readme[1].as_str(), readme[2].as_str()),
        ("1", "9"),
        "{readme:?}"
    );
    let s1 = row("session", "s1");
    assert_eq!((s1[1].as_str(), s1[2].as_str()), ("2", "28"), "{s1:?}");
    let s2 = row("session", "s2");
    assert_eq!((s2[1].as_str(), s2[2].as_str()), ("2", "23"), "{s2:?}");
    // The secrets, apart: each with its rule; neither counted as read.
    let secrets = &section[section
        .find("<h3 id=\"secrets\">Secrets refused (2)</h3>")
        .expect("secrets")..];
    for (rel, rule) in [
        (".env", "secrets:dotenv"),
        ("config/keys.txt", "content:aws-access-key-id"),
    ] {
        let r = &secrets[secrets
            .find(&format!("<code>{rel}</code>"))
            .unwrap_or_else(|| panic!("{rel}"))..];
        let r = &r[..r.find("</tr>").expect("row")];
        assert!(r.contains(&format!("<code>{rule}</code>")), "{r}");
        let before_secrets = &section[..section.find("id=\"secrets\"").expect("secrets")];
        assert!(
            !before_secrets.contains(&format!("<code>{rel}</code>")),
            "{rel} counted as read"
        );
    }
}

/// `html` without its tags (and what is left of a cut one).
fn without_tags(html: &str) -> String {
    let html = html.split_once('>').map_or(html, |(_, rest)| rest);
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Text as the report writes it in HTML.
fn html_text(s: &str) -> String {
    as_dom_text(s).replace('"', "&quot;").replace('\'', "&#39;")
}

#[test]
fn report_of_a_tampered_log_says_where_it_breaks() {
    let g = stopped(demo_log());
    let text = std::fs::read_to_string(&g.audit_log).expect("log");
    // One byte of the fifth record: the `.env` path's record is now something else.
    let lines: Vec<&str> = text.lines().collect();
    let fifth = lines[4];
    // The second digit of the minutes: the line stays a well-formed record.
    let at = text.find(fifth).expect("line") + fifth.find("\"ts\":\"").expect("ts") + 6 + 15;
    let mut bytes = text.clone().into_bytes();
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&g.audit_log, &bytes).expect("tamper");
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("r.html");
    let (code, page) = report(&g, &out);
    assert_eq!(code, Some(1), "a tampered log exits 1");
    assert!(page.contains("Verification: <span class=\"word\">TAMPERED</span>"));
    assert!(
        page.contains("<th>first bad record</th><td>seq 5 in"),
        "where"
    );
    assert!(page.contains("<b>Modified</b>"), "how");
    assert!(
        page.contains("class=\"unverified\""),
        "later changes not vouched for"
    );
    let Some(browser) = chromium() else {
        return skip_or_fail(
            "report_of_a_tampered_log_says_where_it_breaks",
            "no Chromium",
        );
    };
    let r = render(&browser, &out, work.path());
    assert!(
        r.dom
            .contains("Verification: <span class=\"word\">TAMPERED</span>")
    );
    assert_inert(&r);
}

/// `--html -` writes the page to standard output; a path with no log gives an
/// UNREADABLE page and exit 2.
#[test]
fn report_to_stdout_and_of_nothing() {
    let g = stopped(demo_log());
    let log_dir = g.audit_log.parent().expect("log dir");
    let o = run_cli(&["audit", "report", s(log_dir), "--html", "-"]);
    assert_eq!(o.status.code(), Some(0));
    let page = String::from_utf8(o.stdout).expect("UTF-8");
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    assert!(page.contains("Verification: <span class=\"word\">INTACT</span>"));
    let work = tempfile::tempdir().expect("tempdir");
    let out = work.path().join("r.html");
    let o = run_cli(&[
        "audit",
        "report",
        s(&work.path().join("none")),
        "--html",
        s(&out),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let page = std::fs::read_to_string(&out).expect("page");
    assert!(page.contains("Verification: <span class=\"word\">UNREADABLE</span>"));
}
