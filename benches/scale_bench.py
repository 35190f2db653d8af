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
- `squeue` latency with H held array tasks queued, and with a filter that
  matches nothing (`squeue -u nobody -t R`);
- controller RSS with the held tasks queued.

Usage: cargo build --release --workspace --bins && benches/scale_bench.py
       [--bin target/release] [--nodes 1000] [--arrays 20] [--tasks 1000]
       [--held 20000] [--secs 1]
"""
import argparse
import os
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


def rss_mb(cdir):
    pid = open(os.path.join(cdir, "run", "slurmctld.pid")).read().strip()
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


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
        rows.append((f"{a.arrays} arrays of {a.tasks} accepted (4 clients)", f"{accepted:.1f} s"))
        while True:
            c = states(bin_dir, env)
            if not any(c.get(s, 0) for s in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")):
                break
            time.sleep(1)
        dt = time.monotonic() - t0
        bad = sum(v for k, v in c.items() if k != "COMPLETED")
        rows.append((f"{total} jobs of {a.secs} s on {a.nodes} nodes, end to end",
                     f"{total / dt:.0f} jobs/s" + (f" ({bad} not COMPLETED: {c})" if bad else "")))

        for i in range(0, a.held, 1000):
            n = min(1000, a.held - i)
            run(bin_dir, env, "sbatch", "-H", f"--array=0-{n - 1}", "-o", "/dev/null", "--wrap", "true")
        rows.append((f"squeue with {a.held} held array tasks",
                     f"{timed(bin_dir, env, 5, 'squeue') * 1000:.0f} ms"))
        rows.append(("squeue -u nobody -t R (matches nothing)",
                     f"{timed(bin_dir, env, 5, 'squeue', '-u', 'nobody', '-t', 'R') * 1000:.0f} ms"))
        rows.append((f"controller RSS with {a.held} held", f"{rss_mb(cdir)} MB"))
    finally:
        subprocess.run([os.path.join(bin_dir, "slurm-local"), "stop", "--dir", cdir],
                       stdout=subprocess.DEVNULL)
    w = max(len(r[0]) for r in rows)
    print(f"{'measure':<{w}}  {'ours':>12}")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:>12}")


if __name__ == "__main__":
    main()
