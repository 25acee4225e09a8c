#!/usr/bin/env python3
"""`fsgate run`'s view against the same command on the real directory (docs/run.md).

Each workload is generated here (seeded), then timed twice in the same run: natively
(the command in the workspace itself) and through `fsgate run --workspace WS -- ...`.
Both sides run the same timer (this file's `time` subcommand) inside, which runs the
command once to warm caches and then REPS times; the figure is each side's median and
the ratio of the two (the machine's noise touches both alike). RSS and audit bytes are
measured on the gateway's process and log.

    python3 benches/view.py --fsgate target/release/fsgate --work /tmp/w [--only A,B]
        [--fuse-floor PASSTHROUGH_LL]

With --fuse-floor, the read-only workloads are timed a third time, through a FUSE
filesystem that does nothing but pass each request on to the directory (libfuse's own
example server `passthrough_ll`, built by scripts/bench.sh from libfuse3-dev, with its
caches on as the view's are: `cache=always,timeout=10`): the cost of FUSE alone on this
machine, which no server that sees every open can go under.

Run as root (the view needs /dev/fuse). scripts/bench.sh --only view runs it.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

HERE = os.path.abspath(__file__)
SEED = 58
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}
WORKLOADS = [
    "view_git_status",
    "view_grep",
    "view_read_64m",
    "view_unittest",
    "view_cargo_build",
    "view_unpack",
    "view_rm",
    "view_parallel",
    "view_find_rss",
    "view_audit_walk",
    "view_change_floor",
]
# The read-only workloads, which a FUSE floor can be timed for.
FLOOR_WORKLOADS = {"git_status", "grep", "read_64m", "unittest"}
TARGETS = {
    "view_git_status": 2.0,
    "view_grep": 1.5,
    "view_read_64m": 1.2,
    "view_unittest": 1.3,
    "view_cargo_build": 1.3,
    "view_unpack": 3.0,
    "view_rm": 3.0,
    "view_parallel": 1.5,
}
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


# --- the timer, run inside each side -------------------------------------------------


def timer(argv):
    """`time REPS WARM CMD...`: sh scripts with {i} the repetition, run in turn each
    repetition (after WARM untimed repetitions); prints each one's times as JSON."""
    reps, warm, cmds = int(argv[0]), int(argv[1]), argv[2:]
    times = [[] for _ in cmds]
    for n in range(warm + reps):
        i = f"w{n}" if n < warm else str(n - warm)
        for k, cmd in enumerate(cmds):
            t0 = time.perf_counter()
            subprocess.run(["sh", "-c", cmd.replace("{i}", i)], check=True,
                           stdout=subprocess.DEVNULL)
            if n >= warm:
                times[k].append(time.perf_counter() - t0)
    print(json.dumps(times))


# --- workloads, generated -------------------------------------------------------------


def text(rng, lines):
    return "".join(
        " ".join(rng.choice(WORDS) for _ in range(8)) + "\n" for _ in range(lines)
    )


def tree(root, files, per_dir=100, lines=20):
    """`files` small text files, `per_dir` to a directory, seeded."""
    rng = random.Random(SEED)
    os.makedirs(root, exist_ok=True)
    for n in range(files):
        d = os.path.join(root, f"d{n // per_dir:04}")
        if n % per_dir == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{n:06}.txt"), "w") as f:
            f.write(text(rng, lines))


def git_repo(root, files):
    tree(root, files)
    env = {**os.environ, **GIT_ENV}
    # Packed here, before any timing: left to itself, the commit of thousands of loose
    # objects starts a `git gc --auto` in the background, which removes them while the
    # workloads walk `.git` (grep then fails with ENOENT, or times a half-gone tree).
    for args in (["init", "-q", "."], ["add", "-A"], ["commit", "-qm", "gen"], ["gc", "-q"]):
        subprocess.run(["git", "-c", "gc.auto=0", *args], cwd=root, env=env, check=True)


def python_suite(root, modules):
    rng = random.Random(SEED)
    os.makedirs(os.path.join(root, "tests"), exist_ok=True)
    open(os.path.join(root, "tests", "__init__.py"), "w").close()
    for n in range(modules):
        with open(os.path.join(root, "tests", f"test_m{n:03}.py"), "w") as f:
            f.write(
                "import json, os, unittest\n\n"
                f"DATA = {rng.sample(range(1000), 20)!r}\n\n"
                "class T(unittest.TestCase):\n"
                "    def test_sum(self):\n"
                "        self.assertEqual(sum(DATA), sum(sorted(DATA)))\n"
                "    def test_file(self):\n"
                "        with open(__file__) as f:\n"
                "            self.assertIn('unittest', f.read())\n"
            )


def rust_crate(root, modules):
    """A crate of `modules` modules (no dependencies), each a few functions and a test."""
    rng = random.Random(SEED)
    os.makedirs(os.path.join(root, "src"), exist_ok=True)
    with open(os.path.join(root, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "bench-crate"\nversion = "0.1.0"\nedition = "2021"\n')
    with open(os.path.join(root, "src", "main.rs"), "w") as f:
        f.write("".join(f"mod m{n:03};\n" for n in range(modules)))
        f.write("fn main() {\n    let mut t = 0u64;\n")
        f.write("".join(f"    t += m{n:03}::total();\n" for n in range(modules)))
        f.write('    println!("{t}");\n}\n')
    for n in range(modules):
        data = rng.sample(range(1000), 20)
        with open(os.path.join(root, "src", f"m{n:03}.rs"), "w") as f:
            f.write(
                f"const DATA: [u64; 20] = {data!r};\n"
                "pub fn total() -> u64 { DATA.iter().map(|x| x * 2).sum::<u64>() / 2 }\n"
                "#[derive(Debug, Clone, PartialEq)]\npub struct S { pub v: Vec<u64> }\n"
                "impl S { pub fn sorted(&self) -> Vec<u64> { let mut v = self.v.clone(); v.sort(); v } }\n"
                "#[cfg(test)]\nmod t { #[test] fn sums() { assert_eq!(super::total(), super::DATA.iter().sum()); } }\n"
            )


def small_tar(path, files):
    rng = random.Random(SEED)
    with tarfile.open(path, "w") as tar:
        for n in range(files):
            data = text(rng, 4).encode()
            info = tarfile.TarInfo(f"pkg/d{n // 100:03}/f{n:05}.js")
            info.size = len(data)
            info.mtime = 1_700_000_000
            import io

            tar.addfile(info, io.BytesIO(data))


def policy(path, repo):
    """The default policy letting `.git` in (dotenv files stay secret), reads to 128 MiB,
    no cap on the log's growth."""
    with open(os.path.join(repo, "policies", "default.toml")) as f:
        default = f.read()
    start, end = default.index("\n[secrets]\n"), default.index("\n[limits]\n")
    body = (
        default[:start]
        + "\n[secrets]\nbuiltin = false\npatterns = [{ id = \"dotenv\", regex = '^\\.env' }]\n"
        + default[end:]
    )
    body = body.replace("max_read_bytes = 10485760", "max_read_bytes = 134217728")
    # Five unpacks of thousands of files within a minute are more log than a session may
    # add by default (32 MiB a minute, a cap that protects the host): lifted, so the
    # figure is the view's speed, not the cap's refusals.
    body += "\n[audit]\nmax_bytes_per_minute = 0\nmax_session_bytes_per_minute = 0\n"
    with open(path, "w") as f:
        f.write(body)


# --- the two sides ----------------------------------------------------------------------


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = os.path.abspath(a.work)
        self.state = os.path.join(self.work, "state")
        self.policy = os.path.join(self.work, "policy.toml")
        os.makedirs(self.state, exist_ok=True)
        policy(self.policy, os.path.dirname(os.path.dirname(HERE)))

    def fsgate_run(self, ws, log):
        # The view alone: the timing helper (this file) and its interpreter lie outside
        # the workspace, where the default wall would not let them run.
        return [
            self.a.fsgate, "run", "--no-confine", "--workspace", ws, "--policy", self.policy,
            "--audit-log", log, "--backup-dir", os.path.join(self.state, "backups"),
            "--",
        ]

    def log(self, name):
        return os.path.join(self.state, f"{name}.audit.jsonl")

    def timed(self, name, ws, *cmds, warm=1):
        """Each of `cmds` timed on both sides; the first's figures (and the others' as
        `more`)."""
        inner = [sys.executable, HERE, "time", str(self.a.reps), str(warm), *cmds]
        env = {**os.environ, **GIT_ENV}
        native = subprocess.run(inner, cwd=ws, env=env, check=True, capture_output=True)
        view = subprocess.run(
            self.fsgate_run(ws, self.log(name)) + inner,
            cwd=ws, env=env, capture_output=True,
        )
        if view.returncode != 0:
            raise SystemExit(f"{name}: through the view: {view.stderr.decode()[-2000:]}")
        n = json.loads(native.stdout)
        v = json.loads(view.stdout.decode().strip().splitlines()[-1])
        figures = [figure(a, b) for a, b in zip(n, v)]
        if self.a.fuse_floor and name in FLOOR_WORKLOADS:
            floor = statistics.median(self.under_floor(ws, inner, env)[0])
            figures[0].update(floor_s=floor, floor_ratio=floor / figures[0]["native_s"],
                              view_over_floor=figures[0]["view_s"] / floor)
        return {**figures[0], "more": figures[1:]}

    def under_floor(self, ws, inner, env):
        """The timer's figures for `inner` run in a FUSE passthrough mount of `ws`."""
        mnt = os.path.join(self.work, "floor-mnt")
        os.makedirs(mnt, exist_ok=True)
        server = subprocess.Popen(
            [self.a.fuse_floor, "-f", "-o", f"source={ws},cache=always,timeout=10", mnt],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 10
            while not os.path.ismount(mnt):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the FUSE floor did not mount: {server.stderr.read().decode()}")
                time.sleep(0.02)
            out = subprocess.run(inner, cwd=mnt, env=env, capture_output=True)
            if out.returncode != 0:
                raise SystemExit(f"through the FUSE floor: {out.stderr.decode()[-2000:]}")
            return json.loads(out.stdout)
        finally:
            subprocess.run(["umount", mnt], capture_output=True)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()

    def ws(self, name):
        path = os.path.join(self.work, name)
        shutil.rmtree(path, ignore_errors=True)
        return path

    def repo(self):
        path = os.path.join(self.work, "repo")
        if not os.path.isdir(path):
            git_repo(path, self.a.files)
        return path

    def view_git_status(self):
        return self.timed("git_status", self.repo(), "git status --porcelain >/dev/null")

    def view_grep(self):
        # A literal that is in no file: every byte is read. grep exits 1 when nothing
        # matched, 2 on an error: only 1 counts (an error must not be timed as a walk).
        return self.timed("grep", self.repo(), "grep -r -l -F zz-not-there .; test $? -eq 1")

    def view_read_64m(self):
        ws = self.ws("big")
        os.makedirs(ws)
        with open(os.path.join(ws, "big.bin"), "wb") as f:
            f.write(random.Random(SEED).randbytes(64 << 20))
        return self.timed("read_64m", ws, "cat big.bin >/dev/null")

    def view_unittest(self):
        ws = self.ws("suite")
        python_suite(ws, 200)
        return self.timed("unittest", ws, "python3 -m unittest discover -s tests -q 2>/dev/null")

    def view_cargo_build(self):
        """A small crate's `cargo build` from clean (a new target directory each
        repetition, removed after, untimed as `more`)."""
        ws = self.ws("crate")
        rust_crate(ws, 40)
        r = self.timed("cargo_build", ws,
                       "CARGO_TARGET_DIR=t{i} cargo build --offline -q", "rm -rf t{i}")
        r.pop("more")
        return r

    def tarball(self):
        tar = os.path.join(self.work, "small.tar")
        if not os.path.exists(tar):
            small_tar(tar, self.a.unpack_files)
        return tar

    def view_unpack(self):
        """Unpacking, then `rm -rf` of what was unpacked (`view_rm`), each repetition."""
        ws, tar = self.ws("unpack"), self.tarball()
        os.makedirs(ws)
        r = self.timed("unpack", ws, f"mkdir u{{i}} && tar xf {tar} -C u{{i}}", "rm -rf u{i}",
                       warm=0)
        self.rm = r.pop("more")[0]
        return r

    def view_rm(self):
        if getattr(self, "rm", None) is None:
            self.view_unpack()
        return self.rm

    def view_change_floor(self):
        """What the durability promise alone costs, with no server: `rm` of N files each
        made durable as the gateway makes it (its backup written and synced with its
        directory, a write-ahead record synced, the unlink and its directory synced, an
        outcome record synced), against plain `rm` of N files. The view's `rm -rf` ratio
        can come no lower than this one on the same disk."""
        n = min(self.a.unpack_files, 2000)
        ws = self.ws("floor")
        native, floor = [], []
        for _ in range(self.a.reps):
            native.append(durable_rm(ws, n, durable=False))
            floor.append(durable_rm(ws, n, durable=True))
        return {**figure(native, floor), "files": n}

    def view_parallel(self):
        ws = self.ws("parallel")
        tree(os.path.join(ws, "src"), 320, per_dir=40, lines=60)
        worker = os.path.join(self.work, "worker.sh")
        with open(worker, "w") as f:
            f.write('for f in src/d000$1/*; do cat "$f" "$f" > "$2/$1.${f##*/}.o"; done\n')
        cmd = f"mkdir out{{i}} && seq 0 7 | xargs -P8 -I@ sh {worker} @ out{{i}}"
        r = self.timed("parallel", ws, cmd, "rm -rf out{i}")
        r.pop("more")
        return r

    def view_find_rss(self):
        n = self.a.find_files
        ws = os.path.join(self.work, f"find{n}")
        if not os.path.isdir(ws):
            tree(ws, n, per_dir=100, lines=1)
        t0 = time.perf_counter()
        subprocess.run(["sh", "-c", "find . | wc -l"], cwd=ws, check=True, capture_output=True)
        native = time.perf_counter() - t0
        cmd = self.fsgate_run(ws, self.log("find")) + ["sh", "-c", "find . -type f | wc -l"]
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        peak = 0
        while p.poll() is None:
            peak = max(peak, rss_kib(p.pid))
            time.sleep(0.02)
        out = p.stdout.read().decode().strip()
        return {
            "files": n,
            "found": int(out or 0),
            "peak_rss_mib": peak / 1024,
            "native_s": native,
            "view_s": time.perf_counter() - t0,
            "target_mib": 64,
        }

    def view_audit_walk(self):
        ws = os.path.join(self.work, "walk")
        if not os.path.isdir(ws):
            tree(ws, self.a.files, lines=2)
        log = self.log("walk")
        for old in segments(log) + [log + ".checkpoint"]:
            if os.path.exists(old):
                os.remove(old)
        cmd = "find . -type f -print0 | xargs -0 cat >/dev/null"
        subprocess.run(self.fsgate_run(ws, log) + ["sh", "-c", cmd], cwd=ws, check=True,
                       capture_output=True)
        body = ""
        for part in segments(log):
            with open(part) as f:
                body += f.read()
        named = sum(
            1 for d in os.listdir(ws) for fn in os.listdir(os.path.join(ws, d))
            if f"{d}/{fn}" in body
        )
        return {"files": self.a.files, "audit_bytes": len(body.encode()),
                "files_named": named, "target_bytes": 2 << 20}


def segments(log):
    """The log and the segments it rolled over into (8 MiB each)."""
    d, base = os.path.split(log)
    return [os.path.join(d, n) for n in sorted(os.listdir(d))
            if n == base or (n.startswith(base + ".") and n[len(base) + 1:].isdigit())]


def durable_rm(ws, n, durable):
    """Makes `n` small files under `ws`, then times removing them: plainly, or each
    with the syncs a durable, backed-up, recorded removal needs (see
    `view_change_floor`)."""
    shutil.rmtree(ws, ignore_errors=True)
    files, store = os.path.join(ws, "files"), os.path.join(ws, "store")
    os.makedirs(files)
    os.makedirs(store)
    for i in range(n):
        with open(os.path.join(files, f"f{i:05}"), "w") as f:
            f.write("x" * 200)
    log = os.open(os.path.join(ws, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    dfd, sfd = os.open(files, os.O_RDONLY), os.open(store, os.O_RDONLY)
    record = b"{" + b"r" * 1000 + b"}\n"
    t0 = time.perf_counter()
    for i in range(n):
        name = os.path.join(files, f"f{i:05}")
        if durable:
            with open(name, "rb") as src:
                data = src.read()
            b = os.open(os.path.join(store, f"b{i:05}"), os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(b, data + record)
            os.fdatasync(b)
            os.close(b)
            os.fsync(sfd)
            os.write(log, record)
            os.fdatasync(log)
        os.unlink(name)
        if durable:
            os.fsync(dfd)
            os.write(log, record)
            os.fdatasync(log)
    took = time.perf_counter() - t0
    for fd in (log, dfd, sfd):
        os.close(fd)
    return took


def figure(native, view):
    n, v = statistics.median(native), statistics.median(view)
    return {"native_s": n, "view_s": v, "ratio": v / n, "native_all": native,
            "view_all": view}


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def markdown(results):
    rows = ["| workload | native (median) | view (median) | ratio | target |", "|---|---|---|---|---|"]
    for name, r in results.items():
        if name == "view_change_floor":
            rows.append(f"| {name} (`rm` of {r['files']:,} files, each made durable with no "
                        f"server) | {r['native_s']*1000:.1f} ms | {r['view_s']*1000:.1f} ms "
                        f"| {r['ratio']:.1f}× | the floor of view_rm's ratio |")
        elif "ratio" in r:
            floor = (f" (FUSE alone: {r['floor_s']*1000:.1f} ms, {r['floor_ratio']:.2f}×; "
                     f"view / FUSE alone {r['view_over_floor']:.2f}×)" if "floor_s" in r else "")
            rows.append(f"| {name} | {r['native_s']*1000:.1f} ms | {r['view_s']*1000:.1f} ms "
                        f"| {r['ratio']:.2f}×{floor} | ≤ {TARGETS[name]}× |")
        elif "peak_rss_mib" in r:
            rows.append(f"| {name} ({r['files']:,} files, {r['found']:,} found) | "
                        f"{r['native_s']*1000:.0f} ms | {r['view_s']*1000:.0f} ms | "
                        f"peak gateway RSS {r['peak_rss_mib']:.1f} MiB | ≤ 64 MiB |")
        else:
            rows.append(f"| {name} ({r['files']:,} files, {r['files_named']:,} named) | | | "
                        f"audit {r['audit_bytes']/1048576:.2f} MiB | ≤ 2 MiB |")
    return "\n".join(rows) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "time":
        return timer(sys.argv[2:])
    p = argparse.ArgumentParser()
    p.add_argument("--fsgate", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--only", default="view")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--find-files", type=int, default=100_000)
    p.add_argument("--unpack-files", type=int, default=10_000)
    p.add_argument("--fuse-floor", help="a FUSE passthrough server (libfuse's passthrough_ll)")
    p.add_argument("--json")
    p.add_argument("--markdown")
    a = p.parse_args()
    # The commands run in the workloads' directories: a relative path would miss.
    a.fsgate = os.path.abspath(a.fsgate)
    if a.fuse_floor:
        a.fuse_floor = os.path.abspath(a.fuse_floor)
    wanted = [w for w in WORKLOADS if any(w == o or (o == "view") for o in a.only.split(","))]
    b = Bench(a)
    results = {}
    for w in wanted:
        print(f"view.py: {w} ...", file=sys.stderr, flush=True)
        results[w] = getattr(b, w)()
        print(f"view.py: {w}: {json.dumps({k: v for k, v in results[w].items() if k not in ('more', 'native_all', 'view_all')})}",
              file=sys.stderr, flush=True)
    md = markdown(results)
    print(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
