#!/usr/bin/env python3
"""Start-up time and idle memory of `fsgate serve` (MCP and ACP doors).

For each door, spawns the binary with its built-in default policy (audit log and backups
on, in the default per-workspace state dir under a scratch XDG_STATE_HOME) and times
spawn -> the reply to `initialize`, then reads VmRSS and VmHWM once the reply is in.

  cold  a fresh workspace and state dir each run (the audit log is created);
  warm  the same workspace and state dir every run (an existing log is opened, its
        chain checked, and the backup store's retention pass runs).

  big   (with LOG_RECORDS=N) warm starts on a log of N requests, each binary's log
        written first by that binary with fsync always (100,000 take a few minutes here).

Usage: [RUNS=20] [LOG_RECORDS=N] benches/startup.py [FSGATE_BINARY...]
(default target/release/fsgate).
Prints medians and p90 per door and case. With several binaries (before/after builds)
their runs alternate, so that a shared machine's load falls on each alike; even so,
compare only figures from the same run.

Each binary is first copied into a scratch directory and run from there (COPY=0: run
them where they are). Here a binary just written started 0.2-0.7 ms sooner, with about
1.3 MiB more of itself mapped, than the same bytes read back into the page cache after
a while (it looks as if the kernel maps more of a just-written file at each fault), so a
build just made would otherwise seem faster than an older one for that alone.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

RUNS = int(os.environ.get("RUNS", "20"))
BINS = [os.path.abspath(b) for b in sys.argv[1:]] or [os.path.abspath("target/release/fsgate")]

INIT = {
    "mcp": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "startup-bench", "version": "1"}}},
    "acp": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": 1, "clientCapabilities": {}}},
}


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(rest.split()[0])
    return out


def one(binary, door, ws, state):
    env = dict(os.environ, XDG_STATE_HOME=state)
    env.pop("RUST_LOG", None)
    line = (json.dumps(INIT[door]) + "\n").encode()
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "serve", "--transport", door, "--workspace", ws],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(line)
    p.stdin.flush()
    reply = p.stdout.readline()
    elapsed = (time.perf_counter() - t0) * 1000
    if b'"result"' not in reply:
        raise SystemExit("%s: no initialize result: %r" % (door, reply[:200]))
    time.sleep(0.05)  # idle: let any start-up work after the answer settle
    mem = status(p.pid)
    p.stdin.close()
    p.wait(timeout=10)
    return elapsed, mem


def case(door, warm, bins):
    """Runs alternate between the binaries, so that load on a shared machine hits all."""
    res = {b: ([], [], [], []) for b in bins}
    dirs = {}
    for b in bins:
        dirs[b] = (tempfile.mkdtemp(prefix="fsgate-start-ws-"),
                   tempfile.mkdtemp(prefix="fsgate-start-state-"))
        if warm:
            one(b, door, *dirs[b])  # creates the log and the backup dir
    for _ in range(RUNS):
        for b in bins:
            if warm:
                ws, state = dirs[b]
            else:
                ws = tempfile.mkdtemp(prefix="fsgate-start-ws-")
                state = tempfile.mkdtemp(prefix="fsgate-start-state-")
            ms, mem = one(b, door, ws, state)
            times, rss, hwm, threads = res[b]
            times.append(ms)
            rss.append(mem["VmRSS"] / 1024)
            hwm.append(mem["VmHWM"] / 1024)
            threads.append(mem["Threads"])
            if not warm:
                shutil.rmtree(ws)
                shutil.rmtree(state)
    for b in bins:
        shutil.rmtree(dirs[b][0])
        shutil.rmtree(dirs[b][1])
        times, rss, hwm, threads = res[b]
        times.sort()
        p90 = times[int(len(times) * 0.9) - 1] if len(times) >= 10 else times[-1]
        print("%-4s %-5s p50 %6.2f ms  p90 %6.2f ms  | VmRSS p50 %5.1f MiB  VmHWM p50 %5.1f"
              " MiB  threads %d  %s"
              % (door, "warm" if warm else "cold", statistics.median(times), p90,
                 statistics.median(rss), statistics.median(hwm), statistics.median(threads),
                 b if len(bins) > 1 else ""))


def fill_log(binary, ws, state, records):
    """Appends `records` read requests to the log in `state` (through the ACP door)."""
    env = dict(os.environ, XDG_STATE_HOME=state)
    p = subprocess.Popen([binary, "serve", "--workspace", ws], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    path = os.path.join(ws, "f.txt")
    drain = threading.Thread(target=lambda: [p.stdout.readline() for _ in range(records)])
    drain.start()
    req = lambda i: json.dumps({"jsonrpc": "2.0", "id": i, "method": "fs/read_text_file",
                                "params": {"sessionId": "s", "path": path}}) + "\n"
    for i in range(0, records, 1000):
        p.stdin.write("".join(req(j) for j in range(i, min(i + 1000, records))).encode())
    p.stdin.flush()
    drain.join()
    p.stdin.close()
    p.wait(timeout=60)


def big_log_case(records, bins):
    """Warm starts on a log of `records` requests, each binary on a log it wrote itself
    (so its own rotation applies): the active file is verified and searched for open
    intents at every start."""
    res = {b: ([], []) for b in bins}
    dirs = {}
    for b in bins:
        ws = tempfile.mkdtemp(prefix="fsgate-start-ws-")
        state = tempfile.mkdtemp(prefix="fsgate-start-state-")
        with open(os.path.join(ws, "f.txt"), "w") as f:
            f.write("hello\n")
        fill_log(b, ws, state, records)
        dirs[b] = (ws, state)
    for _ in range(max(RUNS // 4, 3)):
        for b in bins:
            ms, mem = one(b, "acp", *dirs[b])
            res[b][0].append(ms)
            res[b][1].append(mem["VmHWM"] / 1024)
    for b in bins:
        times, hwm = res[b]
        print("acp  warm, %d-record log: p50 %7.1f ms  VmHWM p50 %5.1f MiB  %s"
              % (records, statistics.median(times), statistics.median(hwm),
                 b if len(bins) > 1 else ""))
        shutil.rmtree(dirs[b][0])
        shutil.rmtree(dirs[b][1])


def fresh_copies(bins):
    """Each binary copied into a scratch directory (all just written alike); the copies'
    paths, the directory to remove."""
    scratch = tempfile.mkdtemp(prefix="fsgate-start-bin-")
    copies = []
    for i, b in enumerate(bins):
        dst = os.path.join(scratch, "%d-%s" % (i, os.path.basename(b)))
        shutil.copy2(b, dst)
        copies.append(dst)
    return copies, scratch


def main():
    print("%d runs each, spawn -> initialize reply; memory after the reply" % RUNS)
    bins, scratch = BINS, None
    if os.environ.get("COPY", "1") != "0":
        bins, scratch = fresh_copies(BINS)
        for b, orig in zip(bins, BINS):
            print("  %s = fresh copy of %s" % (os.path.basename(b), orig))
    try:
        for door in ("mcp", "acp"):
            for warm in (False, True):
                case(door, warm, bins)
        records = int(os.environ.get("LOG_RECORDS", "0"))
        if records:
            big_log_case(records, bins)
    finally:
        if scratch:
            shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
