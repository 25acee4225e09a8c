#!/usr/bin/env python3
"""Time to undo a session that changed N files (default 1,000): a quarter overwritten, a
quarter edited, a quarter removed, a quarter created in new directories, through
`fsgate serve` (ACP); the gateway stopped; then `fsgate undo --dry-run` and `fsgate undo`
timed, and the workspace checked to be exactly as before the session (every file's
SHA-256, every directory). Prints the times, per file, and the records the undo wrote.

    scripts/bench-undo.py [--bin target/release/fsgate] [--files 1000] [--runs 3]
"""
import argparse, hashlib, json, os, statistics, subprocess, tempfile, time


def tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs:
            out[os.path.relpath(os.path.join(d, n), root)] = "dir"
        for n in files:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def session(binary, ws, state, files):
    p = subprocess.Popen(
        [binary, "serve", "--workspace", ws,
         "--audit-log", os.path.join(state, "audit", "audit.jsonl"),
         "--backup-dir", os.path.join(state, "backups")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for i in range(files):
        path = f"{ws}/src/{i % 20}/f{i}.txt"
        kind = i % 4
        if kind == 0:
            m, params = "fs/write_text_file", {"path": path, "content": f"overwritten {i}\n" * 5}
        elif kind == 1:
            m, params = "_fsgate/edit_text_file", {"path": path, "oldText": "line 2 of", "newText": "LINE 2 of"}
        elif kind == 2:
            m, params = "_fsgate/rm", {"path": path}
        else:
            m, params = "fs/write_text_file", {"path": f"{ws}/new/{i % 20}/n{i}.txt", "content": "new\n"}
        params["sessionId"] = "bench"
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": params}) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        assert '"result"' in line, line
    p.stdin.close()
    assert p.wait() == 0


def undo(binary, ws, state, *extra):
    t0 = time.perf_counter()
    r = subprocess.run(
        [binary, "undo", "--workspace", ws, "--session", "bench",
         "--audit-log", os.path.join(state, "audit", "audit.jsonl"),
         "--backup-dir", os.path.join(state, "backups"), *extra],
        capture_output=True, text=True)
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    return took


def run(binary, files):
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        ws = os.path.realpath(ws)
        for i in range(files):
            d = os.path.join(ws, "src", str(i % 20))
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"f{i}.txt"), "w") as f:
                f.write("".join(f"line {n} of file {i}\n" for n in range(1, 41)))
        before = tree(ws)
        session(binary, ws, state, files)
        assert tree(ws) != before
        log = os.path.join(state, "audit", "audit.jsonl")
        n0 = sum(1 for _ in open(log))
        dry = undo(binary, ws, state, "--dry-run")
        assert sum(1 for _ in open(log)) == n0, "a dry run writes nothing"
        real = undo(binary, ws, state)
        assert tree(ws) == before, "the workspace is as before the session"
        written = sum(1 for _ in open(log)) - n0
        return dry, real, written


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/fsgate")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    results = [run(a.bin, a.files) for _ in range(a.runs)]
    dry = statistics.median(r[0] for r in results)
    real = statistics.median(r[1] for r in results)
    span = lambda k: ", ".join(f"{r[k]:.2f}" for r in results)
    print(f"undo of a session that changed {a.files} files ({a.runs} runs, median):")
    print(f"  --dry-run: {dry:.2f} s ({dry / a.files * 1e3:.2f} ms per file; runs: {span(0)} s)")
    print(f"  undo:      {real:.2f} s ({real / a.files * 1e3:.2f} ms per file; runs: {span(1)} s), "
          f"{results[0][2]} records written, workspace identical to before")
    print(f"  load average during the runs: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
