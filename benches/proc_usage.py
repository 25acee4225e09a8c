"""What a process has used so far, read from /proc: CPU time and thread switches.
Shared by the benchmark scripts beside it. Standard library only."""

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid, thread_prefix=None):
    """utime + stime of a process (all its threads, ended ones too), or of its live
    threads whose name starts with a prefix. Counted in the kernel's ticks (10 ms)."""
    paths = [f"/proc/{pid}/stat"]
    if thread_prefix:
        paths = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError:
                continue
            if name.startswith(thread_prefix):
                paths.append(f"/proc/{pid}/task/{tid}/stat")
    total = 0
    for p in paths:
        try:
            fields = Path(p).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def thread_switches(pid):
    """Voluntary and involuntary switches of a process's live threads (a thread that
    has ended takes its count with it)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            lines = Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")):
                total += int(line.split()[1])
    return total
