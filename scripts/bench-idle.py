#!/usr/bin/env python3
"""Many idle gateways on one host: memory, threads, wake-ups and start-up (issue 34).

Starts N gateways (`fsgate serve --transport mcp`, the built-in default policy), one at a
time, each with a workspace and a state directory of its own (so an audit log and a
backup store of its own), and times each from spawn to the answer to `initialize`. Once
all have answered it counts their threads, waits --settle seconds (an idle gateway
writes one heartbeat checkpoint 30 s after its last record; the runtime's spare threads
end 10 s after their last job), then measures over --window seconds:

  PSS      total proportional set size (/proc/PID/smaps_rollup), MiB, and per gateway
  threads  per gateway (/proc/PID/task), right after `initialize` and once settled
  wake-ups how often their threads were scheduled, per gateway and second: the sum over
           every thread of schedstat's run count (/proc/PID/task/TID/schedstat, third
           field), plus one for each thread that ended during the window
  start-up p50 / p90 of spawn -> `initialize` answered, ms (each started while the
           earlier ones sit idle)

Usage: scripts/bench-idle.py [--count 1000] [--settle 40] [--window 10]
                             [--binary target/release/fsgate] [--json FILE]
Build first: `cargo build --release --bin fsgate`. Needs 2 descriptors per gateway
(the soft limit is raised to the hard one). Exit status 1 if a gateway failed to start.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench-idle", "version": "1"}}}


def tasks(pid):
    try:
        return os.listdir("/proc/%d/task" % pid)
    except FileNotFoundError:
        return []


def runs(pid):
    """{tid: times scheduled} for every thread of `pid`."""
    out = {}
    for tid in tasks(pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                out[tid] = int(f.read().split()[2])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def pss_kib(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def start_one(binary, root, i):
    ws = os.path.join(root, "ws-%d" % i)
    state = os.path.join(root, "state-%d" % i)
    os.mkdir(ws)
    os.mkdir(state)
    env = dict(os.environ, XDG_STATE_HOME=state)
    env.pop("RUST_LOG", None)
    line = (json.dumps(INIT) + "\n").encode()
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "serve", "--transport", "mcp", "--workspace", ws],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(line)
    p.stdin.flush()
    answer = p.stdout.readline()
    ms = (time.perf_counter() - t0) * 1e3
    if b'"result"' not in answer:
        raise RuntimeError("gateway %d: no initialize answer: %r" % (i, answer[:200]))
    return p, ms


def measure(procs, window):
    before = {p.pid: runs(p.pid) for p in procs}
    time.sleep(window)
    after = {p.pid: runs(p.pid) for p in procs}
    wakeups = []
    for p in procs:
        b, a = before[p.pid], after[p.pid]
        ended = sum(1 for t in b if t not in a)
        delta = sum(a[t] - b.get(t, 0) for t in a)
        wakeups.append((delta + ended) / window)
    return wakeups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--settle", type=float, default=40)
    ap.add_argument("--window", type=float, default=10)
    ap.add_argument("--binary", default="target/release/fsgate")
    ap.add_argument("--json")
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * args.count + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(want, soft)), hard))
    root = tempfile.mkdtemp(prefix="fsgate-idle-")
    procs, starts = [], []
    try:
        for i in range(args.count):
            p, ms = start_one(binary, root, i)
            procs.append(p)
            starts.append(ms)
        threads_now = [len(tasks(p.pid)) for p in procs]
        time.sleep(args.settle)
        threads = [len(tasks(p.pid)) for p in procs]
        pss = [pss_kib(p.pid) for p in procs]
        wakeups = measure(procs, args.window)
        report(args, binary, starts, threads_now, threads, pss, wakeups)
    finally:
        for p in procs:
            p.stdin.close()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)


def report(args, binary, starts, threads_now, threads, pss, wakeups):
    q = statistics.quantiles(starts, n=10) if len(starts) > 1 else starts * 9
    total_mib = sum(pss) / 1024
    res = {
        "binary": binary,
        "gateways": args.count,
        "pss_total_mib": round(total_mib, 1),
        "pss_per_gateway_kib": round(sum(pss) / len(pss)),
        "threads_after_initialize_max": max(threads_now),
        "threads_settled_max": max(threads),
        "threads_settled_median": statistics.median(threads),
        "wakeups_per_s_per_gateway_mean": round(statistics.mean(wakeups), 3),
        "wakeups_per_s_per_gateway_max": round(max(wakeups), 3),
        "gateways_that_woke": sum(1 for w in wakeups if w > 0),
        "startup_ms_p50": round(statistics.median(starts), 2),
        "startup_ms_p90": round(q[8], 2),
        "settle_s": args.settle,
        "window_s": args.window,
    }
    print("| figure | value |")
    print("|---|---|")
    for k, v in res.items():
        print("| %s | %s |" % (k, v))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        print("bench-idle: %s" % e, file=sys.stderr)
        sys.exit(1)
