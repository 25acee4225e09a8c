#!/usr/bin/env python3
"""What shipping every record to rsyslog costs the gateway, and how fast it ships.

Starts rsyslog (imtcp on a loopback port, every message's MSG written to a file) and
`fsgate serve` over ACP on stdio, then pipelines `fs/read_text_file` requests of 4 KiB
files (one audit record each) with a fixed number in flight, checking every answer:

1. steady: request throughput with `[audit] ship` off and on, runs alternating, medians;
   with shipping on, how long after the last answer rsyslog has every record (lag) and
   the records per second delivered, first request to last record received;
2. catch-up under load: rsyslog stopped while a load runs (records pile up in the log),
   then started again while a second load runs; the backlog and the new records reach
   it at the shipping throughput, and the second load's request rate is compared with
   the steady one without shipping.

Python standard library only. Everything runs on this machine: the figures include
rsyslog's and this driver's CPU on the same cores (reported beside them).

    python3 benches/ship.py --fsgate target/release/fsgate [--reps 3] [--requests 60000]
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from proc_usage import cpu_seconds

REPO = Path(__file__).resolve().parent.parent
FILES = 256


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rsyslog:
    def __init__(self, binary, work):
        self.binary, self.dir, self.port = binary, work / "rsyslog", free_port()
        self.dir.mkdir()
        (self.dir / "rsyslog.conf").write_text(
            f'global(workDirectory="{self.dir}" maxMessageSize="64k" '
            'parser.escapeControlCharactersOnReceive="off")\n'
            'module(load="imtcp")\n'
            f'input(type="imtcp" address="127.0.0.1" port="{self.port}")\n'
            'template(name="raw" type="string" string="%msg%\\n")\n'
            f'template(name="perlog" type="string" string="{self.dir}/out-%procid%.log")\n'
            '*.* action(type="omfile" dynaFile="perlog" template="raw")\n'
        )
        self.proc = None
        self.seen = {}

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, "-n", "-f", self.dir / "rsyslog.conf", "-i", self.dir / "pid"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        sys.exit("ship.py: rsyslogd did not start")

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait()
            self.proc = None

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def seqs(self, log_id):
        """Distinct records of the log `log_id` that rsyslog has written (read on from
        where the last call stopped)."""
        offset, seen = self.seen.get(log_id, (0, set()))
        try:
            with open(self.dir / f"out-{log_id}.log", "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return 0
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            seen.add(line[7:line.find(b",")])
        self.seen[log_id] = (offset + end, seen)
        return len(seen)


class Gateway:
    def __init__(self, fsgate, work, name, ship_port, fsync):
        d = work / name
        d.mkdir()
        policy = (REPO / "policies/default.toml").read_text()
        policy += f'\n[audit]\nfsync = "{fsync}"\n'
        if ship_port:
            policy += f'ship = [{{ host = "127.0.0.1", port = {ship_port} }}]\n'
        (d / "policy.toml").write_text(policy)
        self.log = d / "audit.jsonl"
        self.proc = subprocess.Popen(
            [fsgate, "serve", "--workspace", work / "ws", "--policy", d / "policy.toml",
             "--audit-log", self.log, "--backup-dir", d / "backups"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            bufsize=1 << 16)
        self.next_id = 1

    def requests(self, ws, n):
        lines = []
        for _ in range(n):
            path = ws / f"f{self.next_id % FILES:03}.txt"
            lines.append(
                b'{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":'
                b'{"sessionId":"bench","path":"%s"}}\n' % (self.next_id, str(path).encode()))
            self.next_id += 1
        return lines

    def load(self, ws, n, inflight):
        """Sends n reads, at most `inflight` unanswered; returns the seconds taken."""
        reqs = self.requests(ws, n)
        window = threading.Semaphore(inflight)
        bad = []

        def writer():
            stdin = self.proc.stdin
            for r in reqs:
                # Flush only when the window is full: requests go out in runs.
                if not window.acquire(blocking=False):
                    stdin.flush()
                    window.acquire()
                stdin.write(r)
            stdin.flush()

        t = threading.Thread(target=writer)
        start = time.perf_counter()
        t.start()
        for _ in range(n):
            line = self.proc.stdout.readline()
            if b'"result"' not in line or b"file " not in line:
                bad.append(line[:200])
            window.release()
        elapsed = time.perf_counter() - start
        t.join()
        if bad:
            sys.exit(f"ship.py: {len(bad)} wrong answers, e.g. {bad[0]!r}")
        return elapsed

    def records(self):
        """The seq of the log's last record (the log rotates: its active file's last)."""
        with open(self.log, "rb") as f:
            f.seek(max(0, os.path.getsize(self.log) - 65536))
            last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        return int(last[7:last.index(b",")])

    def log_id(self):
        with open(self.log, "rb") as f:
            first = f.readline()
        i = first.find(b'"log":"')
        return first[i + 7:i + 39].decode()

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def wait_records(rs, gw, timeout=300):
    """Seconds until rsyslog has every record of the gateway's log so far."""
    head, start = gw.records(), time.perf_counter()
    while True:
        have = rs.seqs(gw.log_id())
        if have >= head:
            return time.perf_counter() - start
        if time.perf_counter() - start > timeout:
            sys.exit(f"ship.py: rsyslog has {have} of {head} records")
        time.sleep(0.01)


def steady(args, work, rs, variant, rep):
    ws = work / "ws"
    port = rs.port if variant == "on" else None
    gw = Gateway(args.fsgate, work, f"{variant}-{rep}", port, args.fsync)
    gw.load(ws, 2000, args.inflight)  # warm-up, untimed
    if variant == "on":
        wait_records(rs, gw)
    base = gw.records()
    pid = gw.proc.pid
    cpu0, ship0, rs0 = cpu_seconds(pid), cpu_seconds(pid, "fsgate-audit-sh"), rs.cpu()
    secs = gw.load(ws, args.requests, args.inflight)
    out = {"ops": args.requests / secs,
           "cpu_us": (cpu_seconds(pid) - cpu0) / args.requests * 1e6}
    if variant == "on":
        lag = wait_records(rs, gw)
        n = gw.records() - base
        out["lag_s"] = lag
        out["ship_rps"] = n / (secs + lag)
        out["shipper_us"] = (cpu_seconds(pid, "fsgate-audit-sh") - ship0) / n * 1e6
        out["rsyslog_us"] = (rs.cpu() - rs0) / n * 1e6
    gw.stop()
    return out


def catch_up(args, work, rs):
    """Backlog built with rsyslog down, shipped while a second load runs."""
    ws = work / "ws"
    gw = Gateway(args.fsgate, work, "catch-up", rs.port, args.fsync)
    gw.load(ws, 2000, args.inflight)
    wait_records(rs, gw)
    delivered = gw.records()
    rs.stop()
    gw.load(ws, args.requests, args.inflight)
    time.sleep(1)
    backlog = gw.records() - delivered
    start = time.perf_counter()
    rs.start()
    secs = gw.load(ws, args.requests, args.inflight)
    after = wait_records(rs, gw)
    total = time.perf_counter() - start
    shipped = gw.records() - delivered
    gw.stop()
    return {"backlog": backlog, "shipped": shipped, "load_ops": args.requests / secs,
            "drain_s": total, "ship_rps": shipped / total, "after_load_s": after}


LOAD_BEFORE = " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fsgate", required=True)
    ap.add_argument("--rsyslogd", default=shutil.which("rsyslogd") or "/usr/sbin/rsyslogd")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=60000)
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--fsync", choices=["always", "batch", "never"], default="always",
                    help="[audit] fsync of the gateway (batch: no sync on the request path, "
                    "so the CPU the shipper and rsyslog take shows most)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fsgate-ship-bench-") as tmp:
        work = Path(tmp)
        (work / "ws").mkdir()
        for i in range(FILES):
            (work / "ws" / f"f{i:03}.txt").write_text(f"file {i}\n" + "x" * 4089 + "\n")
        rs = Rsyslog(args.rsyslogd, work)
        rs.start()
        runs = {"off": [], "on": []}
        for rep in range(args.reps):
            order = ["off", "on"] if rep % 2 == 0 else ["on", "off"]
            for v in order:
                runs[v].append(steady(args, work, rs, v, rep))
                print(f"rep {rep} {v}: {runs[v][-1]}", file=sys.stderr)
        cu = catch_up(args, work, rs)
        print(f"catch-up: {cu}", file=sys.stderr)
        rs.stop()
    report(args, runs, cu)


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def report(args, runs, cu):
    off, on = med(runs["off"], "ops"), med(runs["on"], "ops")
    print(f"{args.requests} reads of 4 KiB, {args.inflight} in flight, ACP on stdio, "
          f"{args.reps} alternating runs, medians; [audit] fsync = {args.fsync}; load average "
          f"before: {LOAD_BEFORE}\n")
    print("| shipping | requests/s | gateway CPU/request (us) | lag after the last answer (s) "
          "| records/s delivered | shipper CPU/record (us) | rsyslog CPU/record (us) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| off | {off:.0f} | {med(runs['off'], 'cpu_us'):.1f} | - | - | - | - |")
    print(f"| on (TCP to rsyslog) | {on:.0f} | {med(runs['on'], 'cpu_us'):.1f} "
          f"| {med(runs['on'], 'lag_s'):.2f} | {med(runs['on'], 'ship_rps'):.0f} "
          f"| {med(runs['on'], 'shipper_us'):.2f} | {med(runs['on'], 'rsyslog_us'):.1f} |")
    print(f"\nrequest throughput with shipping on: {on / off * 100 - 100:+.1f}% "
          f"(each run: off {[round(r['ops']) for r in runs['off']]}, "
          f"on {[round(r['ops']) for r in runs['on']]})")
    print(f"\ncatch-up: {cu['backlog']} records waiting when rsyslog came back, "
          f"{cu['shipped']} with a second load's; all delivered in {cu['drain_s']:.2f} s "
          f"({cu['ship_rps']:.0f} records/s), {cu['after_load_s']:.2f} s after that load's last "
          f"answer; that load ran at {cu['load_ops']:.0f} requests/s "
          f"({cu['load_ops'] / off * 100 - 100:+.1f}% vs shipping off)")


if __name__ == "__main__":
    main()
