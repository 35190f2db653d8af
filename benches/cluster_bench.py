#!/usr/bin/env python3
"""Whole-cluster throughput benchmark.

Starts a local cluster (controller + 3 node daemons on 127.0.0.1) from the
release binaries and prints a table:

- sequential `sbatch` submissions per second,
- time for 1000 trivial jobs to finish,
- `squeue` latency with 3000 pending jobs,
- step launch latency (`srun -N3 true` inside an allocation),
- controller RSS,
- batch jobs per second through one node daemon (a 1-node cluster with 64
  CPUs: jobs really fork, run `true` as the user and are cleaned up).

The clusters run with accounting (slurmdbd on SQLite) and TLS between every
process, as slurm-local does; `--no-tls` runs them in clear text.

Usage: cargo build --release --workspace --bins && benches/cluster_bench.py
       [--bin target/release] [--submit N] [--jobs N] [--pending N] [--no-tls]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

SLURM_2205 = {
    "submit": "195 /s",
    "jobs": "81.8 s",
    "squeue": "48 ms",
    "rss": "54 MB",
}


def run(bin_dir, env, prog, *args, check=True):
    p = subprocess.run([os.path.join(bin_dir, prog), *args], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        sys.exit(f"{prog} {' '.join(args)} failed: {p.stderr}")
    return p.stdout


def job_states(bin_dir, env):
    out = run(bin_dir, env, "squeue", "-h", "-t", "all", "-o", "%i %T")
    return [l.split() for l in out.splitlines() if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release"))
    ap.add_argument("--submit", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=3000)
    ap.add_argument("--one-node", type=int, default=500, help="jobs for the one-node row")
    ap.add_argument("--no-tls", action="store_true", help="clusters in clear text")
    a = ap.parse_args()
    tls = ["--no-tls"] if a.no_tls else []
    bin_dir = os.path.abspath(a.bin)
    tmp = tempfile.mkdtemp(prefix="slurm-bench-")
    cdir = os.path.join(tmp, "cluster")
    subprocess.run([os.path.join(bin_dir, "slurm-local"), "start", "--dir", cdir, *tls], check=True,
                   stdout=subprocess.DEVNULL)
    env = dict(os.environ, SLURM_CONF=os.path.join(cdir, "slurm.conf"))
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    os.chdir(work)
    rows = []
    try:
        # 1. Sequential submissions (held, so running jobs do not compete).
        t0 = time.monotonic()
        for _ in range(a.submit):
            run(bin_dir, env, "sbatch", "-H", "-o", "/dev/null", "--wrap", "true")
        dt = time.monotonic() - t0
        rows.append(("sequential sbatch", f"{a.submit / dt:.0f} /s", SLURM_2205["submit"]))
        run(bin_dir, env, "scancel", "-t", "PD", check=False)

        # 2. N trivial jobs, from first submission to last completion.
        t0 = time.monotonic()
        ids = set()
        for _ in range(a.jobs):
            ids.add(run(bin_dir, env, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip())
        while True:
            live = [j for j, st in job_states(bin_dir, env) if j in ids and st in ("PENDING", "RUNNING", "COMPLETING")]
            if not live:
                break
            time.sleep(0.2)
        dt = time.monotonic() - t0
        failed = [j for j, st in job_states(bin_dir, env) if j in ids and st != "COMPLETED"]
        rows.append((f"{a.jobs} trivial jobs to finish", f"{dt:.1f} s" + (f" ({len(failed)} not COMPLETED)" if failed else ""), SLURM_2205["jobs"]))

        # 3. squeue with many pending jobs.
        for _ in range(a.pending):
            run(bin_dir, env, "sbatch", "-H", "-o", "/dev/null", "--wrap", "true")
        n = 20
        t0 = time.monotonic()
        for _ in range(n):
            run(bin_dir, env, "squeue")
        dt = (time.monotonic() - t0) / n
        rows.append((f"squeue with {a.pending} pending", f"{dt * 1000:.1f} ms", SLURM_2205["squeue"]))

        # 4. Step launch latency inside an allocation: srun -N3 true.
        alloc = run(bin_dir, env, "sbatch", "--parsable", "-N", "3", "-o", "/dev/null", "--wrap", "sleep 600").strip()
        while [st for j, st in job_states(bin_dir, env) if j == alloc] != ["RUNNING"]:
            time.sleep(0.1)
        senv = dict(env, SLURM_JOB_ID=alloc)
        n = 20
        t0 = time.monotonic()
        for _ in range(n):
            run(bin_dir, senv, "srun", "-N3", "true")
        dt = (time.monotonic() - t0) / n
        rows.append(("step launch (srun -N3 true)", f"{dt * 1000:.1f} ms", "-"))
        run(bin_dir, env, "scancel", alloc, check=False)

        # 5. Controller memory.
        pid = open(os.path.join(cdir, "run", "slurmctld.pid")).read().strip()
        rss = 0
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) // 1024
        rows.append(("controller RSS", f"{rss} MB", SLURM_2205["rss"]))
    finally:
        subprocess.run([os.path.join(bin_dir, "slurm-local"), "stop", "--dir", cdir], stdout=subprocess.DEVNULL)

    # 6. Batch jobs through one node daemon, from first submission to last completion.
    odir = os.path.join(tmp, "one")
    subprocess.run([os.path.join(bin_dir, "slurm-local"), "start", "--dir", odir, "--nodes", "1",
                    "--cpus", "64", "--mem", "64000", *tls], check=True, stdout=subprocess.DEVNULL)
    env1 = dict(os.environ, SLURM_CONF=os.path.join(odir, "slurm.conf"))
    try:
        t0 = time.monotonic()
        ids = set()
        for _ in range(a.one_node):
            ids.add(run(bin_dir, env1, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip())
        while True:
            live = [j for j, st in job_states(bin_dir, env1) if j in ids and st in ("PENDING", "RUNNING", "COMPLETING")]
            if not live:
                break
            time.sleep(0.1)
        dt = time.monotonic() - t0
        failed = [j for j, st in job_states(bin_dir, env1) if j in ids and st != "COMPLETED"]
        rows.append((f"batch jobs through one slurmd ({a.one_node})",
                     f"{a.one_node / dt:.0f} jobs/s" + (f" ({len(failed)} not COMPLETED)" if failed else ""), "-"))
    finally:
        subprocess.run([os.path.join(bin_dir, "slurm-local"), "stop", "--dir", odir], stdout=subprocess.DEVNULL)
    w = max(len(r[0]) for r in rows)
    print("TLS between the processes:", "off" if a.no_tls else "on")
    print(f"{'measure':<{w}}  {'ours':>24}  {'Slurm 22.05':>12}")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:>24}  {r[2]:>12}")


if __name__ == "__main__":
    main()
