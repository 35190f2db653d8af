#!/usr/bin/env python3
"""The controller at cluster scale, with node daemons in mock mode.

Starts `slurm-local --mock=SECS` from the release binaries: one slurmd
process serves N nodes (default 1000 x 8 CPUs) and ends each job after SECS
seconds without forking it, so the controller is what is measured (with
accounting to slurmdbd on SQLite and TLS on, as slurm-local runs). Prints:

- how long it takes `sbatch` to have A arrays of T tasks accepted, submitted
  by 4 clients at once (A x T jobs);
- end to end: from the first submission until every job has ended, in
  jobs/s, and how many did not end COMPLETED (NODE_FAIL would mean the busy
  controller declared healthy nodes dead);
- the main and backfill schedulers' mean and longest pass (from `sdiag`);
- how long one array of 1000 held tasks takes to be accepted on an idle
  controller;
- `squeue` latency with H held array tasks queued, all of them, filtered
  by user (every task matches), by state and by both (nothing matches);
- controller RSS with the held tasks queued, and its growth per held task;
- beside each figure, issue 17's target and Slurm's documented figure where
  there is one.

Usage: cargo build --release --workspace --bins && benches/scale_bench.py
       [--bin target/release] [--nodes 1000] [--arrays 20] [--tasks 1000]
       [--held 20000] [--secs 1]
"""
import argparse
import os
import pwd
import subprocess
import sys
import tempfile
import threading
import time


from cluster_bench import run  # one way to run a command, for both benchmarks


def states(bin_dir, env):
    out = run(bin_dir, env, "squeue", "-h", "-r", "-t", "all", "-o", "%T")
    counts = {}
    for s in out.split():
        counts[s] = counts.get(s, 0) + 1
    return counts


def rss_kb(cdir):
    pid = open(os.path.join(cdir, "run", "slurmctld.pid")).read().strip()
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pass_times(bin_dir, env):
    """The main and backfill schedulers' mean and max pass times (sdiag, µs)."""
    out = run(bin_dir, env, "sdiag")
    found = {}
    section = None
    for line in out.splitlines():
        if line.startswith("Main schedule statistics"):
            section = "main"
        elif line.startswith("Backfilling stats"):
            section = "bf"
        elif section and ":" in line:
            k, _, v = line.strip().partition(":")
            if k.strip() in ("Last cycle", "Max cycle", "Mean cycle"):
                found[(section, k.strip())] = v.strip()
    return found


def mean_max(found, section):
    return f"{found.get((section, 'Mean cycle'), '?')} / {found.get((section, 'Max cycle'), '?')} µs"


def timed(bin_dir, env, n, *args):
    t0 = time.monotonic()
    for _ in range(n):
        run(bin_dir, env, *args)
    return (time.monotonic() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release"))
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--arrays", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--held", type=int, default=20000)
    ap.add_argument("--secs", type=int, default=1)
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.bin)
    tmp = tempfile.mkdtemp(prefix="slurm-scale-")
    cdir = os.path.join(tmp, "cluster")
    subprocess.run([os.path.join(bin_dir, "slurm-local"), "start", "--dir", cdir,
                    "--nodes", str(a.nodes), "--cpus", "8", "--mem", "32000",
                    f"--mock={a.secs}"], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, SLURM_CONF=os.path.join(cdir, "slurm.conf"))
    os.chdir(tmp)
    rows = []
    try:
        total = a.arrays * a.tasks
        t0 = time.monotonic()
        errors = []

        def submit(k):
            for i in range(k, a.arrays, 4):
                p = subprocess.run([os.path.join(bin_dir, "sbatch"), f"--array=0-{a.tasks - 1}",
                                    "-o", "/dev/null", "--wrap", "true"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    errors.append(p.stderr)

        ths = [threading.Thread(target=submit, args=(k,)) for k in range(4)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        if errors:
            sys.exit(f"sbatch failed: {errors[0]}")
        accepted = time.monotonic() - t0
        rows.append((f"{a.arrays} arrays of {a.tasks} accepted (4 clients)", f"{accepted:.1f} s", "", ""))
        while True:
            c = states(bin_dir, env)
            if not any(c.get(s, 0) for s in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")):
                break
            time.sleep(1)
        dt = time.monotonic() - t0
        bad = sum(v for k, v in c.items() if k != "COMPLETED")
        target = ">= 3,000 jobs/s" if a.nodes <= 1000 else ">= 1,000 jobs/s"
        rows.append((f"{total} jobs of {a.secs} s on {a.nodes} nodes, end to end",
                     f"{total / dt:.0f} jobs/s", target, "~500 jobs/s sustained (HTC guide)"))
        if bad:
            rows.append(("jobs that did not end COMPLETED", f"{bad}: {c}", "0", ""))

        found = pass_times(bin_dir, env)
        rows.append(("scheduler pass (main), mean / max", mean_max(found, "main"), "", ""))
        rows.append(("scheduler pass (backfill), mean / max", mean_max(found, "bf"), "", ""))

        # One array on an idle controller, as a user would submit it.
        time.sleep(2)
        rss0 = rss_kb(cdir)
        one = timed(bin_dir, env, 3, "sbatch", "-H", "--array=0-999", "-o", "/dev/null",
                    "--wrap", "true")
        rows.append(("an array of 1000 accepted (sbatch -H, idle controller)",
                     f"{one * 1000:.0f} ms", "<= 50 ms", ""))
        for i in range(3000, a.held, 1000):
            n = min(1000, a.held - i)
            run(bin_dir, env, "sbatch", "-H", f"--array=0-{n - 1}", "-o", "/dev/null", "--wrap", "true")
        held = max(a.held, 3000)
        rows.append((f"squeue with {held} held array tasks",
                     f"{timed(bin_dir, env, 5, 'squeue') * 1000:.0f} ms",
                     "<= 300 ms at 100,000", ""))
        me = pwd.getpwuid(os.getuid()).pw_name
        rows.append((f"squeue -u {me} (every held task)",
                     f"{timed(bin_dir, env, 5, 'squeue', '-u', me) * 1000:.0f} ms", "", ""))
        rows.append(("squeue -t R (matches nothing)",
                     f"{timed(bin_dir, env, 5, 'squeue', '-t', 'R') * 1000:.0f} ms", "", ""))
        rows.append(("squeue -u nobody -t R (matches nothing)",
                     f"{timed(bin_dir, env, 5, 'squeue', '-u', 'nobody', '-t', 'R') * 1000:.0f} ms",
                     "<= 20 ms", ""))
        # The pass that starts one more job beside the held ones.
        run(bin_dir, env, "sbatch", "-o", "/dev/null", "--wrap", "true")
        time.sleep(1)
        last = pass_times(bin_dir, env).get(("bf", "Last cycle"), "?")
        rows.append((f"scheduler pass starting 1 job, {held} held queued (last)", f"{last} µs",
                     "", ""))
        rss1 = rss_kb(cdir)
        rows.append((f"controller RSS with {held} held", f"{rss1 // 1024} MB", "", ""))
        rows.append(("controller memory per held job (RSS growth / jobs)",
                     f"{(rss1 - rss0) * 1024 / held:.0f} B", "<= 2 KB", ""))
    finally:
        subprocess.run([os.path.join(bin_dir, "slurm-local"), "stop", "--dir", cdir],
                       stdout=subprocess.DEVNULL)
        # What was measured, even when a later step failed.
        head = ("measure", "ours", "target (issue 17)", "Slurm (documented)")
        ws = [max(len(r[k]) for r in rows + [head]) for k in range(4)]
        for r in [head] + rows:
            print("  ".join(f"{r[k]:<{ws[k]}}" for k in range(4)).rstrip())


if __name__ == "__main__":
    main()
