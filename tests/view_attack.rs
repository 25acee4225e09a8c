//! `fsgate run`'s confinement attacked from inside (docs/run.md, SECURITY.md): a command
//! run through the view, as root and as `nobody`, tries every way out we know of to a
//! file the policy denies (`.env`, `.ssh/id_rsa`), the real directory under the view and
//! fsgate's own files. Each attempt is a system call made by python3 (ctypes), so the
//! test asserts the exact errno it gets; the secrets never appear in what the command
//! printed, and the real workspace is as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::view::{NOBODY, ViewWs, finished, give_to_nobody, text, view_ws};
use crate::common::{DesktopFuse, bin};

const SECRET: &str = "hunter2-attack-secret";
const SSH_SECRET: &str = "ssh-attack-secret";
const OUTSIDE: &str = "outside-attack-secret";

/// Who runs `fsgate run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum User {
    Root,
    Nobody,
}

const BOTH: [User; 2] = [User::Root, User::Nobody];

/// Every attack script starts with this: `t(name, call)` prints `name ok` or
/// `name ERRNO`; `read(name, path)` prints `name ok` and what it read, or `name ERRNO`.
const PRELUDE: &str = r#"import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
W = os.getcwd()
def code(e):
    return errno.errorcode.get(e, str(e))
def t(name, r):
    print(name, 'ok' if r >= 0 else code(ctypes.get_errno()), flush=True)
    return r
def read(name, path, flags=os.O_RDONLY):
    try:
        fd = os.open(path, flags)
        data = os.read(fd, 65536)
        os.close(fd)
        print(name, 'ok', data, flush=True)
    except OSError as e:
        print(name, code(e.errno), flush=True)
def as_named(name, link, target):
    def get(p):
        try:
            with open(p, 'rb') as f:
                return f.read()
        except OSError as e:
            return code(e.errno)
    print(name, 'as-named' if get(link) == get(target) else 'differs', flush=True)
def call(name, fn):
    try:
        fn()
        print(name, 'ok', flush=True)
    except OSError as e:
        print(name, code(e.errno), flush=True)
def ppid_of(pid):
    return int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])
CHILD = os.getppid()
GW = ppid_of(CHILD)
"#;

view_ws! {
    /// A workspace holding secrets (`.env`, `.ssh/id_rsa`), `a.txt`; a secret file beside
    /// it (`../secret`); a state directory (audit log, backups).
    Ws
}

impl Ws {
    fn new(user: User) -> Ws {
        let ws = ViewWs::new_inside("fsgate-attack-ws", "fsgate-attack-state", "ws");
        let root = &ws.root;
        let parent = root.parent().expect("parent");
        std::fs::create_dir_all(root.join(".ssh")).expect("mkdir");
        std::fs::write(root.join(".env"), format!("TOKEN={SECRET}\n")).expect("write");
        std::fs::write(root.join(".ssh/id_rsa"), format!("{SSH_SECRET}\n")).expect("write");
        std::fs::write(root.join("a.txt"), "hello\n").expect("write");
        std::fs::write(parent.join("secret"), format!("{OUTSIDE}\n")).expect("write");
        std::fs::set_permissions(
            parent.join("secret"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod");
        if user == User::Nobody {
            give_to_nobody(parent);
            give_to_nobody(&ws.state);
        }
        Ws(ws)
    }

    /// `fsgate run --no-confine` of `python3 -c PRELUDE+script` as `user`, in the
    /// workspace. Without the wall outside the workspace (the default), the command keeps
    /// every capability in its user namespace: what the view alone must withstand.
    fn command(&self, user: User, script: &str) -> Command {
        self.command_in(user, script, false)
    }

    /// As [`command`](Self::command), inside the default wall if `walled`.
    fn command_in(&self, user: User, script: &str, walled: bool) -> Command {
        let mut cmd = if user == User::Nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()]);
            c
        } else {
            Command::new(bin())
        };
        cmd.arg("run")
            .arg("--workspace")
            .arg(&self.root)
            .arg("--audit-log")
            .arg(self.log())
            .arg("--backup-dir")
            .arg(self.backups())
            .args((!walled).then_some("--no-confine"))
            .args(["--", "/usr/bin/python3", "-c"])
            .arg(format!("{PRELUDE}{script}"))
            .env("HOME", &self.state)
            .env("XDG_STATE_HOME", &self.state)
            .current_dir(&self.root);
        cmd
    }

    /// Runs the attack `script` as `user`: what it printed (stdout and stderr),
    /// checked free of every secret.
    fn attack(&self, user: User, script: &str) -> String {
        let _fuse = (user == User::Nobody).then(DesktopFuse::ensure);
        let out = finished(self.command(user, script));
        let stdout = text(&out.stdout);
        let stderr = text(&out.stderr);
        for secret in [SECRET, SSH_SECRET, OUTSIDE] {
            assert!(
                !stdout.contains(secret) && !stderr.contains(secret),
                "{user:?}: a secret reached the command:\n{stdout}\n{stderr}"
            );
        }
        assert!(
            stderr.contains("ended:"),
            "{user:?}: the run did not end well:\n{stdout}\n{stderr}"
        );
        stdout
    }

    /// Every file under the real workspace and beside it, with its content.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut files = BTreeMap::new();
        let parent = self.root.parent().expect("parent");
        walk(parent, &mut files);
        files
    }

    /// Whether the log holds a refusal by the view of `op` on `path`.
    fn refused(&self, op: &str, path: &str) -> bool {
        self.records().iter().any(|r| {
            r["transport"] == "view"
                && r["op"] == op
                && r["path"] == path
                && r["decision"] == "deny"
        })
    }
}

fn walk(dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            files.insert(path.clone(), b"<dir>".to_vec());
            walk(&path, files);
        } else if kind.is_symlink() {
            let to = std::fs::read_link(&path).expect("readlink");
            files.insert(path, to.into_os_string().into_encoded_bytes());
        } else {
            files.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
    }
}

/// Runs `script` as each user on a fresh workspace: what it printed must be `expect`
/// (per user), and the real workspace and what lies beside it are unchanged.
fn attack_both(script: &str, expect: impl Fn(User) -> String) -> Vec<Ws> {
    let mut kept = Vec::new();
    for user in BOTH {
        let ws = Ws::new(user);
        let before = ws.snapshot();
        let got = ws.attack(user, script);
        assert_eq!(got, expect(user), "{user:?}");
        assert_eq!(ws.snapshot(), before, "{user:?}: the disk changed");
        kept.push(ws);
    }
    kept
}

/// umount (plain and lazy), a bind mount and a tmpfs over the workspace: the command
/// holds no capability over the view's mount namespace (EPERM), and `.env` still does
/// not exist.
#[test]
fn view_attack_the_view_cannot_be_unmounted_or_covered() {
    let script = r#"
t('umount', libc.umount2(W.encode(), 0))
t('umount-lazy', libc.umount2(W.encode(), 2))
t('bind', libc.mount(b'/tmp', W.encode(), None, 4096, None))
t('tmpfs', libc.mount(b'none', W.encode(), b'tmpfs', 0, None))
t('remount', libc.mount(None, W.encode(), None, 32 | 1, None))
read('env', '.env')
"#;
    let expect =
        "umount EPERM\numount-lazy EPERM\nbind EPERM\ntmpfs EPERM\nremount EPERM\nenv ENOENT\n";
    attack_both(script, |_| expect.to_owned());
}

/// A user and mount namespace of the command's own (`unshare -Urm`): there it may mount,
/// but the view is locked to what lies beneath it: unmounting it is EINVAL, a bind of
/// `/` that would show what the view covers is EINVAL, a recursive one shows the view
/// again, and a tmpfs over the workspace covers only the view, in that namespace.
#[test]
fn view_attack_a_new_user_and_mount_namespace_uncovers_nothing() {
    let script = r#"
uid, gid = os.getuid(), os.getgid()
t('unshare', libc.unshare(0x10000000 | 0x00020000))
open('/proc/self/setgroups', 'w').write('deny')
open('/proc/self/uid_map', 'w').write('0 %d 1' % uid)
open('/proc/self/gid_map', 'w').write('0 %d 1' % gid)
t('umount', libc.umount2(W.encode(), 0))
t('umount-lazy', libc.umount2(W.encode(), 2))
read('env', '.env')
t('scratch', libc.mount(b'none', b'/mnt', b'tmpfs', 0, None))
os.mkdir('/mnt/x')
t('bind-root', libc.mount(b'/', b'/mnt/x', None, 4096, None))
t('rbind-root', libc.mount(b'/', b'/mnt/x', None, 4096 | 16384, None))
read('rbind-env', '/mnt/x' + W + '/.env')
print('rbind-ls', sorted(os.listdir('/mnt/x' + W)))
t('cover', libc.mount(b'none', W.encode(), b'tmpfs', 0, None))
print('covered-ls', os.listdir(W))
"#;
    let expect = "unshare ok\numount EINVAL\numount-lazy EINVAL\nenv ENOENT\nscratch ok\n\
        bind-root EINVAL\nrbind-root ok\nrbind-env ENOENT\nrbind-ls ['a.txt']\ncover ok\ncovered-ls []\n";
    attack_both(script, |_| expect.to_owned());
}

/// The gateway's `/proc` entries (root, cwd, descriptors, memory, environment), ptrace
/// and `process_vm_readv` of the gateway and of the process that holds the view's
/// namespace, and `/proc/1/root` (the machine's namespace, where no view covers the
/// workspace): all refused.
#[test]
fn view_attack_the_gateways_proc_entries_and_ptrace_lead_nowhere() {
    let script = r#"
read('gw-root', '/proc/%d/root%s/.env' % (GW, W))
read('gw-cwd', '/proc/%d/cwd/.env' % GW)
read('gw-mem', '/proc/%d/mem' % GW)
read('gw-environ', '/proc/%d/environ' % GW)
read('init-root', '/proc/1/root%s/.env' % W)
try:
    fds = os.listdir('/proc/%d/fd' % GW)
    print('gw-fds', len(fds) > 3)
except OSError as e:
    print('gw-fds', code(e.errno))
    fds = [str(n) for n in range(64)]
got = set()
for n in fds:
    for how in ('readlink', 'open'):
        try:
            if how == 'readlink':
                os.readlink('/proc/%d/fd/%s' % (GW, n))
            else:
                os.close(os.open('/proc/%d/fd/%s' % (GW, n), os.O_RDONLY))
            got.add(how + ' ok')
        except OSError as e:
            got.add(how + ' ' + code(e.errno))
print('gw-fd', sorted(got))
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
for name, pid in (('gw', GW), ('child', CHILD)):
    t(name + '-attach', libc.ptrace(16, pid, None, None))
    t(name + '-seize', libc.ptrace(0x4206, pid, None, None))
    buf = ctypes.create_string_buffer(64)
    class iovec(ctypes.Structure):
        _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = iovec(0x400000, 64)
    t(name + '-vm-read', libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
"#;
    attack_both(script, |user| {
        // Root may list the descriptors' numbers (its uid owns the directory), not
        // follow them; `nobody` may not even list them.
        let fds = match user {
            User::Root => "True",
            User::Nobody => "EACCES",
        };
        format!(
            "gw-root EACCES\ngw-cwd EACCES\ngw-mem EACCES\ngw-environ EACCES\n\
             init-root EACCES\ngw-fds {fds}\ngw-fd ['open EACCES', 'readlink EACCES']\n\
             gw-attach EPERM\ngw-seize EPERM\ngw-vm-read EPERM\n\
             child-attach EPERM\nchild-seize EPERM\nchild-vm-read EPERM\n"
        )
    });
}

/// `setns` into the gateway's, the view holder's or the machine's namespaces: their
/// `/proc/PID/ns` entries do not open (EACCES), and the command's own user namespace's
/// parent cannot be entered.
#[test]
fn view_attack_setns_into_another_namespace_is_refused() {
    let script = r#"
for name, pid in (('gw', GW), ('child', CHILD), ('init', 1)):
    for ns in ('mnt', 'user'):
        try:
            fd = os.open('/proc/%d/ns/%s' % (pid, ns), os.O_RDONLY)
            t('%s-%s' % (name, ns), libc.setns(fd, 0))
        except OSError as e:
            print('%s-%s' % (name, ns), code(e.errno))
read('env', '.env')
"#;
    let expect = "gw-mnt EACCES\ngw-user EACCES\nchild-mnt EACCES\nchild-user EACCES\n\
        init-mnt EACCES\ninit-user EACCES\nenv ENOENT\n";
    attack_both(script, |_| expect.to_owned());
}

/// `name_to_handle_at` + `open_by_handle_at`: a handle of a file in the view, one of the
/// filesystem beneath (the workspace's parent directory, on the real disk) and forged
/// ones do not open (EPERM: no CAP_DAC_READ_SEARCH where those filesystems live).
#[test]
fn view_attack_open_by_handle_at_reaches_nothing() {
    let script = r#"
class fh(ctypes.Structure):
    _fields_ = [('bytes', ctypes.c_uint), ('type', ctypes.c_int), ('f', ctypes.c_ubyte * 128)]
def handle(name, path):
    h = fh(128, 0)
    mnt = ctypes.c_int(0)
    r = t(name, libc.name_to_handle_at(-100, path.encode(), ctypes.byref(h), ctypes.byref(mnt), 0))
    return h if r == 0 else None
h = handle('view-handle', W + '/a.txt')
below = handle('below-handle', os.path.dirname(W))
root_fd = os.open('/', os.O_RDONLY | os.O_DIRECTORY)
t('below-open', libc.open_by_handle_at(root_fd, ctypes.byref(below), os.O_RDONLY | os.O_DIRECTORY))
view_fd = os.open(W, os.O_RDONLY | os.O_DIRECTORY)
t('view-open', libc.open_by_handle_at(view_fd, ctypes.byref(h), os.O_RDONLY))
forged = fh(8, 1)
t('view-open-forged', libc.open_by_handle_at(view_fd, ctypes.byref(forged), os.O_RDONLY))
t('below-open-forged', libc.open_by_handle_at(root_fd, ctypes.byref(forged), os.O_RDONLY))
"#;
    let expect = "view-handle ok\nbelow-handle ok\nbelow-open EPERM\nview-open EPERM\n\
        view-open-forged EPERM\nbelow-open-forged EPERM\n";
    attack_both(script, |_| expect.to_owned());
}

/// The command inherits no descriptor of fsgate's (of the workspace, its state, the
/// FUSE device, a socket); `..` from the view's root
/// and back in, `/proc/self/cwd`, `/proc/self/root`, a descriptor of the view's root,
/// and (as root, who may) `chroot`: every way back to the workspace's path leads through
/// the view, where the secrets do not exist.
#[test]
fn view_attack_dotdot_proc_self_and_chroot_find_only_the_view() {
    let script = r#"
mine = (os.path.dirname(W), os.environ['HOME'], '/dev/fuse', 'socket:', 'anon_inode:')
leaked = []
for n in os.listdir('/proc/self/fd'):
    try:
        to = os.readlink('/proc/self/fd/' + n)
    except OSError:
        continue
    leaked += [to] if to.startswith(mine) else []
print('inherited', leaked)
base = os.path.basename(W)
read('dotdot', '../%s/.env' % base)
read('dotdot-ssh', '../%s/.ssh/id_rsa' % base)
read('proc-cwd', '/proc/self/cwd/.env')
read('proc-root', '/proc/self/root%s/.env' % W)
os.chdir('..')
read('parent', base + '/.env')
os.chdir(W)
d = os.open('.', os.O_PATH)
read('openat', '/proc/self/fd/%d/.env' % d)
print('ls', sorted(os.listdir('.')), sorted(os.listdir('..' + '/' + base)))
r = libc.chroot(b'/')
t('chroot', r)
if r == 0:
    read('chroot-env', W + '/.env')
    t('chroot-parent', libc.chroot(os.path.dirname(W).encode()))
    read('chroot-parent-env', '/%s/.env' % base)
"#;
    attack_both(script, |user| {
        // No descriptor of fsgate's (the real workspace, the device) reached it.
        let common = "inherited []\ndotdot ENOENT\ndotdot-ssh ENOENT\nproc-cwd ENOENT\nproc-root ENOENT\n\
            parent ENOENT\nopenat ENOENT\nls ['a.txt'] ['a.txt']\n";
        match user {
            // Root in its own user namespace may chroot; the view is there all the same.
            User::Root => format!(
                "{common}chroot ok\nchroot-env ENOENT\nchroot-parent ok\nchroot-parent-env ENOENT\n"
            ),
            User::Nobody => format!("{common}chroot EPERM\n"),
        }
    });
}

/// Links planted in the workspace: a symlink made through the view that leads out
/// (`../secret`, `/etc/shadow`) or a hard link (of `.env`, of a file) is refused; a
/// symlink to `.env` is made but leads to nothing (the kernel follows it through the
/// view); links planted before the run (by someone else) lead to nothing the policy
/// denies, and one leading out gives exactly what naming its target gives.
#[test]
fn view_attack_links_planted_in_the_workspace_lead_to_nothing_denied() {
    let script = r#"
call('symlink-outside', lambda: os.symlink('../secret', 's1'))
call('symlink-shadow', lambda: os.symlink('/etc/shadow', 's2'))
call('symlink-env', lambda: os.symlink('.env', 's3'))
call('link-env', lambda: os.link('.env', 'h1'))
call('link-ssh', lambda: os.link('.ssh/id_rsa', 'h2'))
call('link-file', lambda: os.link('a.txt', 'h3'))
read('planted-env', 'lenv')
read('planted-ssh', 'lssh')
as_named('planted-outside', 'lout', '../secret')
read('through-env-link', 's3')
read('planted-dir', 'ldir/id_rsa')
print('ls', sorted(os.listdir('.')))
"#;
    for user in BOTH {
        let ws = Ws::new(user);
        for (link, to) in [
            ("lenv", ".env"),
            ("lssh", ".ssh/id_rsa"),
            ("lout", "../secret"),
            ("ldir", ".ssh"),
        ] {
            let at = ws.root.join(link);
            std::os::unix::fs::symlink(to, &at).expect("symlink");
            if user == User::Nobody {
                std::os::unix::fs::lchown(&at, Some(NOBODY), Some(NOBODY)).expect("chown");
            }
        }
        let before = ws.snapshot();
        let got = ws.attack(user, script);
        assert_eq!(
            got,
            "symlink-outside EPERM\nsymlink-shadow EPERM\nsymlink-env ok\n\
             link-env ENOENT\nlink-ssh ENOENT\nlink-file EPERM\n\
             planted-env ENOENT\nplanted-ssh ENOENT\nplanted-outside as-named\n\
             through-env-link ENOENT\nplanted-dir ENOENT\n\
             ls ['a.txt', 'ldir', 'lenv', 'lout', 'lssh', 's3']\n",
            "{user:?}"
        );
        let mut after = ws.snapshot();
        let s3 = after.remove(&ws.root.join("s3"));
        assert_eq!(s3.as_deref(), Some(&b".env"[..]), "{user:?}: s3");
        assert_eq!(after, before, "{user:?}: the disk changed");
        // The view asked the gateway about each secret name, and each was refused.
        assert!(ws.refused("stat", ".env"), "{user:?}: .env not recorded");
        assert!(ws.refused("stat", ".ssh"), "{user:?}: .ssh not recorded");
    }
}

/// A link through a link: `d/e/up` leads to the root (allowed), and a link whose target
/// goes down through `up` and then climbs with `..` would lead out of the workspace
/// once the run is over, where the host's tools follow it: it is refused, as is any
/// target with a `..` after a name.
#[test]
fn view_attack_a_link_climbing_through_another_link_is_refused() {
    let script = r#"
os.makedirs('d/e')
call('up', lambda: os.symlink('../..', 'd/e/up'))
call('through-up', lambda: os.symlink('d/e/up/../../etc/hostname', 's4'))
call('name-then-up', lambda: os.symlink('d/../a.txt', 's5'))
call('ups-first', lambda: os.symlink('../../a.txt', 'd/e/s6'))
"#;
    for user in BOTH {
        let ws = Ws::new(user);
        let got = ws.attack(user, script);
        assert_eq!(
            got, "up ok\nthrough-up EPERM\nname-then-up EPERM\nups-first ok\n",
            "{user:?}"
        );
        for refused in ["s4", "s5"] {
            assert!(
                std::fs::symlink_metadata(ws.root.join(refused)).is_err(),
                "{user:?}: {refused} made"
            );
        }
    }
}

/// Renaming a secret to a name the policy allows (or moving its directory, or
/// exchanging it with a file) to read it: the secret does not exist (ENOENT), nothing
/// moves, and the lookup is recorded as refused.
#[test]
fn view_attack_renaming_a_secret_to_read_it_fails() {
    let script = r#"
call('rename-env', lambda: os.rename('.env', 'e.txt'))
call('rename-ssh', lambda: os.rename('.ssh', 'ssh'))
call('rename-key', lambda: os.rename('.ssh/id_rsa', 'k.txt'))
t('exchange', libc.renameat2(-100, b'a.txt', -100, b'.env', 2))
call('replace-env', lambda: os.rename('a.txt', '.env'))
read('env', '.env')
read('e', 'e.txt')
"#;
    let kept = attack_both(script, |_| {
        "rename-env ENOENT\nrename-ssh ENOENT\nrename-key ENOENT\nexchange ENOENT\n\
         replace-env EACCES\nenv ENOENT\ne ENOENT\n"
            .to_owned()
    });
    for ws in kept {
        assert!(ws.refused("stat", ".env"), ".env not recorded as refused");
        assert!(
            ws.refused("rename", "a.txt"),
            "the rename over .env not recorded"
        );
    }
}

/// fsgate's own files by their real paths: the audit log reads as nothing and cannot
/// be written, truncated or removed; the backup store cannot be listed or written; and
/// both are whole after the run (the log verifies, no backup lost or changed).
#[test]
fn view_attack_the_audit_log_and_backups_by_their_real_paths() {
    let script = r#"
LOG, BK = sys.argv[1], sys.argv[2]
read('log', LOG)
read('log-append', LOG, os.O_WRONLY | os.O_APPEND)
call('log-truncate', lambda: os.truncate(LOG, 0))
call('log-unlink', lambda: os.unlink(LOG))
call('bk-list', lambda: os.listdir(BK))
read('bk-write', BK + '/x', os.O_WRONLY | os.O_CREAT)
call('bk-rmdir', lambda: os.rmdir(BK))
"#;
    for user in BOTH {
        let ws = Ws::new(user);
        // A first run leaves records and a backup (a.txt replaced).
        let first = ws.attack(user, "open('a.txt', 'w').write('new\\n')\n");
        assert_eq!(first, "");
        let log_before = std::fs::read(ws.log()).expect("log");
        let mut backups = BTreeMap::new();
        walk(&ws.backups(), &mut backups);
        assert!(!backups.is_empty(), "no backup made");
        let fuse = (user == User::Nobody).then(DesktopFuse::ensure);
        let mut cmd = ws.command(user, script);
        cmd.arg(ws.log()).arg(ws.backups());
        let out = finished(cmd);
        drop(fuse);
        let stdout = text(&out.stdout);
        // Both are covered by an empty, read-only directory of mode 0: root finds
        // nothing there, `nobody` may not even look.
        let expect = match user {
            User::Root => {
                "log ENOENT\nlog-append ENOENT\nlog-truncate ENOENT\nlog-unlink EROFS\n\
                 bk-list ENOENT\nbk-write ENOENT\nbk-rmdir EROFS\n"
            }
            User::Nobody => {
                "log EACCES\nlog-append EACCES\nlog-truncate EACCES\nlog-unlink EACCES\n\
                 bk-list EACCES\nbk-write EACCES\nbk-rmdir EACCES\n"
            }
        };
        assert_eq!(stdout, expect, "{user:?}: {}", text(&out.stderr));
        let log_after = std::fs::read(ws.log()).expect("log");
        assert!(
            log_after.starts_with(&log_before),
            "{user:?}: the log lost records"
        );
        let mut after = BTreeMap::new();
        walk(&ws.backups(), &mut after);
        assert_eq!(after, backups, "{user:?}: the backups changed");
        let verify = Command::new(bin())
            .args(["audit", "verify"])
            .arg(ws.log())
            .output()
            .expect("audit verify");
        assert!(verify.status.success(), "{}", text(&verify.stderr));
    }
}

/// The device beneath the workspace, found in `/proc/self/mountinfo`: it does not open
/// for reading (the raw disk holds every secret), and it cannot be mounted, neither in
/// the command's namespace nor in one of its own.
#[test]
fn view_attack_the_device_beneath_cannot_be_read_or_mounted() {
    let script = r#"
best = ('', '')
for line in open('/proc/self/mountinfo'):
    left, right = line.split(' - ')
    point, (kind, source) = left.split()[4], right.split()[:2]
    if kind != 'fuse.fsgate' and (W + '/').startswith(point.rstrip('/') + '/') and len(point) > len(best[0]):
        best = (point, source)
dev = best[1]
print('device', dev.startswith('/dev/'))
read('dev-read', dev)
t('dev-mount', libc.mount(dev.encode(), b'/mnt', b'ext4', 1, None))
t('unshare', libc.unshare(0x10000000 | 0x00020000))
t('dev-mount-own-ns', libc.mount(dev.encode(), b'/mnt', b'ext4', 1, None))
read('dev-read-own-ns', dev)
"#;
    attack_both(script, |user| {
        let denied = match user {
            User::Root => "EPERM",
            User::Nobody => "EACCES",
        };
        format!(
            "device True\ndev-read {denied}\ndev-mount EPERM\nunshare ok\n\
             dev-mount-own-ns EPERM\ndev-read-own-ns {denied}\n"
        )
    });
}

/// TIOCSTI (and TIOCLINUX) on the terminal the command was given: a character pushed
/// into the terminal's input would be read by the shell that started fsgate, after the
/// run, outside the view. Refused (EPERM), and nothing reaches the terminal's input, with
/// and without the wall (`/dev/tty` cannot be opened inside it: the ioctls are tried on
/// standard input, the same terminal).
#[test]
fn view_attack_tiocsti_on_the_terminal_is_refused() {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::io::Read;
    let script = r#"
import fcntl, termios
fd = 0
def sti():
    for c in b'echo INJ' + b'ECTED\n':
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
call('tiocsti', sti)
call('tioclinux', lambda: fcntl.ioctl(fd, 0x541C, bytes([11])))
"#;
    for (user, walled) in BOTH.iter().flat_map(|&u| [(u, false), (u, true)]) {
        let ws = Ws::new(user);
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname(&master, Vec::new()).expect("ptsname");
        let name = PathBuf::from(name.to_str().expect("utf-8"));
        if user == User::Nobody {
            std::os::unix::fs::chown(&name, Some(NOBODY), Some(NOBODY)).expect("chown");
        }
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&name)
            .expect("open the terminal");
        let _fuse = (user == User::Nobody).then(DesktopFuse::ensure);
        let inner = ws.command_in(user, script, walled);
        let mut cmd = Command::new("setsid");
        cmd.arg("--ctty")
            .arg(inner.get_program())
            .args(inner.get_args());
        cmd.envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .current_dir(&ws.root)
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd.output().expect("fsgate run");
        let stdout = text(&out.stdout);
        assert_eq!(
            stdout,
            "tiocsti EPERM\ntioclinux EPERM\n",
            "{user:?} walled {walled}: {}",
            text(&out.stderr)
        );
        // What is left on the terminal: anything pushed into its input is echoed there.
        rustix::fs::fcntl_setfl(&master, rustix::fs::OFlags::NONBLOCK).expect("nonblock");
        let mut echoed = Vec::new();
        let _ = std::fs::File::from(master).read_to_end(&mut echoed);
        assert!(
            !text(&echoed).contains("INJECTED"),
            "{user:?} walled {walled}: injected into the terminal: {}",
            text(&echoed)
        );
    }
}
