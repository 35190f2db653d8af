#!/usr/bin/env python3
"""slurmrestd latency: `GET /slurm/v0.0.44/jobs/` with many jobs queued.

Starts a local cluster from the release binaries, queues N held jobs, runs
slurmrestd on a unix socket (rest_auth/local) and prints the mean latency
and body size of the job list, with the queue unchanged and right after a
job changed. Latency is curl's time_total (connect to last byte read): a
Python client reading 16 MB adds ~50 ms of its own. Real slurmrestd 22.05 on
this kind of machine took ~900 ms for 3600 jobs (11 MB).

Usage: cargo build --release --workspace --bins && benches/rest_bench.py
       [--bin target/release] [--jobs 3600] [--reps 10]
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time


def get(sock_path, path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    chunks = []
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        chunks.append(b)
    s.close()
    data = b"".join(chunks)
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), len(body)


def timed_get(sock_path, path):
    """Seconds from connect to the last byte, by curl."""
    out = subprocess.run(["curl", "-s", "--unix-socket", sock_path, "-o", "/dev/null",
                          "-w", "%{http_code} %{time_total}", "http://localhost" + path],
                         check=True, capture_output=True, text=True).stdout.split()
    if out[0] != "200":
        sys.exit(f"GET {path}: HTTP {out[0]}")
    return float(out[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release"))
    ap.add_argument("--jobs", type=int, default=3600)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.bin)
    tmp = tempfile.mkdtemp(prefix="slurm-restbench-")
    cdir = os.path.join(tmp, "cluster")
    subprocess.run([os.path.join(bin_dir, "slurm-local"), "start", "--dir", cdir, "--no-accounting"],
                   check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, SLURM_CONF=os.path.join(cdir, "slurm.conf"))
    os.chdir(tmp)
    restd = None
    try:
        for _ in range(a.jobs):
            subprocess.run([os.path.join(bin_dir, "sbatch"), "-H", "-o", "/dev/null", "--wrap", "true"],
                           env=env, check=True, stdout=subprocess.DEVNULL)
        sock = os.path.join(tmp, "restd.sock")
        restd = subprocess.Popen([os.path.join(bin_dir, "slurmrestd"), "-a", "rest_auth/local",
                                  f"unix:{sock}"], env=env,
                                 stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(tmp, "slurmrestd.log"), "w"))
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        status, size = get(sock, "/slurm/v0.0.44/jobs/")
        if " 200 " not in status + " ":
            sys.exit(f"GET jobs: {status}")
        dt = sum(timed_get(sock, "/slurm/v0.0.44/jobs/") for _ in range(a.reps)) / a.reps
        # After a change: one job updated before each request.
        first = subprocess.run([os.path.join(bin_dir, "squeue"), "-h", "-o", "%i"], env=env,
                               check=True, capture_output=True, text=True).stdout.split()[0]
        changed = 0.0
        for i in range(a.reps):
            subprocess.run([os.path.join(bin_dir, "scontrol"), "update", f"jobid={first}",
                            f"comment=rep{i}"], env=env, check=True, stdout=subprocess.DEVNULL)
            changed += timed_get(sock, "/slurm/v0.0.44/jobs/")
        changed /= a.reps
        print(f"{'measure':<44}  {'ours':>12}  {'Slurm 22.05':>12}")
        print(f"{'GET jobs/ with ' + str(a.jobs) + ' jobs (unchanged queue)':<44}  {dt * 1000:>9.1f} ms  {'~900 ms':>12}")
        print(f"{'GET jobs/ with ' + str(a.jobs) + ' jobs (after a change)':<44}  {changed * 1000:>9.1f} ms  {'~900 ms':>12}")
        print(f"(slurmrestd's log: {os.path.join(tmp, 'slurmrestd.log')})", file=sys.stderr)
        print(f"{'body size':<44}  {size / 1e6:>9.1f} MB  {'11 MB':>12}")
    finally:
        if restd:
            restd.kill()
        subprocess.run([os.path.join(bin_dir, "slurm-local"), "stop", "--dir", cdir], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
