#!/usr/bin/env python3
"""Cost of `[vcs] stage = true` per write: N sequential fs/write_text_file requests to
`fsgate serve` (ACP) on a git repository with T tracked files, staging on and off;
prints the median and p90 request latency of each, and the median time staging itself
took (the `vcs-stage` records' `duration_us`).

    scripts/bench-vcs-stage.py [--bin target/debug/fsgate] [--writes 200] [--tracked 0,2000]
"""
import argparse, json, os, statistics, subprocess, tempfile, time

POLICY = """version = 1
[vcs]
stage = {stage}
[[rule]]
id = "all"
effect = "allow"
ops = ["read", "write", "delete", "list"]
paths = ["**"]
"""


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(root, tracked):
    git(root, "init", "-q")
    for i in range(tracked):
        d = os.path.join(root, "tracked", str(i % 50))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"t{i}.txt"), "w") as f:
            f.write(f"{i}\n")
    if tracked:
        git(root, "add", "tracked")
    git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init", "--allow-empty")


def run(binary, stage, writes, tracked):
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        ws = os.path.realpath(ws)
        make_repo(ws, tracked)
        pol = os.path.join(state, "p.toml")
        with open(pol, "w") as f:
            f.write(POLICY.format(stage="true" if stage else "false"))
        p = subprocess.Popen(
            [binary, "serve", "--workspace", ws, "--policy", pol,
             "--audit-log", os.path.join(state, "a.jsonl"),
             "--backup-dir", os.path.join(state, "b")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        times = []
        for i in range(writes):
            msg = {"jsonrpc": "2.0", "id": i, "method": "fs/write_text_file",
                   "params": {"sessionId": "s", "path": f"{ws}/w/f{i % 20}.txt",
                              "content": f"write {i}\n" * 20}}
            t0 = time.perf_counter()
            p.stdin.write(json.dumps(msg) + "\n")
            p.stdin.flush()
            line = p.stdout.readline()
            times.append(time.perf_counter() - t0)
            assert '"result"' in line, line
        p.stdin.close()
        p.wait()
        times.sort()
        staging = []
        with open(os.path.join(state, "a.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("kind") == "vcs-stage":
                    staging.append(r["details"]["duration_us"] / 1e3)
        inner = statistics.median(staging) if staging else 0.0
        return statistics.median(times) * 1e3, times[int(len(times) * 0.9)] * 1e3, inner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/fsgate")
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--tracked", default="0,2000")
    a = ap.parse_args()
    for tracked in [int(t) for t in a.tracked.split(",")]:
        for stage in (False, True):
            med, p90, inner = run(a.bin, stage, a.writes, tracked)
            print(f"tracked={tracked:5d} stage={'on ' if stage else 'off'} "
                  f"request median={med:.2f} ms p90={p90:.2f} ms; "
                  f"staging itself median={inner:.2f} ms ({a.writes} writes)")


if __name__ == "__main__":
    main()
