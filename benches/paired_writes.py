#!/usr/bin/env python3
"""Two fsgate builds' durable writes one at a time, measured side by side.

    python3 benches/paired_writes.py BASE_BIN NEW_BIN [--writes N] [--kind new|over]
        [--gap MS] [--burst N] [--door acp|mcp] [--dir DIR] [--json]

On this machine the disk's sync time drifts by 2x within minutes, so two builds timed
one after the other differ by more than a change to the write path does. Here both
builds serve at once (`fsgate serve`, ACP on stdio, or MCP with `--door mcp`, each its
own workspace, log and backup store under a temporary directory), and 4 KiB writes alternate between them
(which goes first alternates too), 2 ms apart (`--gap`), so that the drift touches
both alike. With `--burst N`, each build gets N writes in a row, back to back, before
the other's turn: a client that never pauses.
`--kind new` writes a new file each time, `--kind over` overwrites one file (with its
backup). Prints each build's p50 and p90 and the ratio of the p50s (NEW / BASE), and
beside them each gateway's CPU per write (user and system, all its threads, from
`/proc/PID/stat`) and thread switches per write (voluntary and not, summed over
`/proc/PID/task/*/status`; a thread that ends during the run takes its count with it;
the CPU is counted in the kernel's 10 ms ticks, 20 us a write over 500 writes):
figures the disk's drift barely moves. `--dir /dev/shm` puts the workspaces, logs and
backup stores on tmpfs, where the syncs cost next to nothing: what is left is the
gateway's own work. With `--json`, one JSON object. Every answer is checked. Standard
library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from proc_usage import cpu_seconds, thread_switches


class Gateway:
    """One `fsgate serve` on its own workspace; requests and answers one at a time."""

    def __init__(self, binary, root, door):
        self.ws = os.path.join(root, "ws")
        self.door = door
        os.makedirs(self.ws)
        state = os.path.join(root, "state")
        self.proc = subprocess.Popen(
            [binary, "serve", "--transport", door, "--workspace", self.ws,
             "--audit-log", os.path.join(state, "audit.jsonl"),
             "--backup-dir", os.path.join(state, "backups")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0
        if door == "acp":
            self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            return
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "paired_writes", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def call(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        answer = json.loads(self.proc.stdout.readline())
        failed = "error" in answer or (answer.get("result") or {}).get("isError")
        if answer.get("id") != self.next_id or failed:
            sys.exit(f"paired_writes: unexpected answer to {method}: {answer}")
        return answer

    def write(self, name, content):
        path = os.path.join(self.ws, name)
        started = time.perf_counter()
        if self.door == "acp":
            self.call("fs/write_text_file", {"sessionId": "s", "path": path, "content": content})
        else:
            self.call("tools/call", {"name": "write_file",
                                     "arguments": {"path": path, "content": content}})
        took = time.perf_counter() - started
        with open(path) as f:
            if f.read() != content:
                sys.exit(f"paired_writes: {path} does not hold what was written")
        return took

    def usage(self):
        """(CPU seconds, thread switches) of the gateway so far."""
        return cpu_seconds(self.proc.pid), thread_switches(self.proc.pid)

    def stop(self):
        self.proc.stdin.close()
        if self.proc.wait(timeout=30) != 0:
            sys.exit("paired_writes: a gateway did not stop cleanly")


def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--writes", type=int, default=500)
    ap.add_argument("--kind", choices=["new", "over"], default="new")
    ap.add_argument("--gap", type=float, default=2.0, help="ms between turns")
    ap.add_argument("--burst", type=int, default=1, help="writes in a row per turn")
    ap.add_argument("--door", choices=["acp", "mcp"], default="acp")
    ap.add_argument("--dir", help="where the temporary directory is made (e.g. /dev/shm)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fsgate-paired-", dir=args.dir) as tmp:
        gws = [Gateway(b, os.path.join(tmp, str(i)), args.door)
               for i, b in enumerate([args.base, args.new])]
        before = [g.usage() for g in gws]
        times = [[], []]
        for turn in range(0, args.writes, args.burst):
            for k in ((0, 1) if (turn // args.burst) % 2 == 0 else (1, 0)):
                for i in range(turn, min(turn + args.burst, args.writes)):
                    name = f"new{i}.txt" if args.kind == "new" else "a.txt"
                    content = f"{i:08}\n" + "x" * 4087
                    times[k].append(gws[k].write(name, content))
                time.sleep(args.gap / 1e3)
        used = [tuple(b - a for a, b in zip(before[k], gws[k].usage())) for k in (0, 1)]
        for g in gws:
            g.stop()
    out = {
        "kind": args.kind,
        "door": args.door,
        "writes": args.writes,
        "gap_ms": args.gap,
        "burst": args.burst,
    }
    for k, side in enumerate(("base", "new")):
        out[side] = {
            "bin": (args.base, args.new)[k],
            "p50_ms": quantile(times[k], 0.5),
            "p90_ms": quantile(times[k], 0.9),
            "cpu_us_per_write": used[k][0] * 1e6 / len(times[k]),
            "switches_per_write": used[k][1] / len(times[k]),
        }
    out["ratio_p50"] = out["new"]["p50_ms"] / out["base"]["p50_ms"]
    if args.json:
        print(json.dumps(out))
        return
    for side in ("base", "new"):
        s = out[side]
        print(f"{side:4s} {args.kind:4s} p50 {s['p50_ms']:.3f} ms  p90 {s['p90_ms']:.3f} ms  "
              f"CPU {s['cpu_us_per_write']:.0f} us/write  "
              f"{s['switches_per_write']:.1f} switches/write  ({s['bin']})")
    print(f"p50 new / base: {out['ratio_p50']:.3f}")


if __name__ == "__main__":
    main()
