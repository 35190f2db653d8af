#!/usr/bin/env python3
"""slurmrestd latency: `GET /slurm/v0.0.44/jobs/` with many jobs queued.

Starts a local cluster from the release binaries, queues N held jobs, runs
slurmrestd on a unix socket (rest_auth/local) and prints the mean latency
and body size of the job list. Real slurmrestd 22.05 on this kind of
machine took ~900 ms for 3600 jobs (11 MB).

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
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        status, size = get(sock, "/slurm/v0.0.44/jobs/")
        if " 200 " not in status + " ":
            sys.exit(f"GET jobs: {status}")
        t0 = time.monotonic()
        for _ in range(a.reps):
            get(sock, "/slurm/v0.0.44/jobs/")
        dt = (time.monotonic() - t0) / a.reps
        print(f"{'measure':<40}  {'ours':>12}  {'Slurm 22.05':>12}")
        print(f"{'GET jobs/ with ' + str(a.jobs) + ' jobs':<40}  {dt * 1000:>9.1f} ms  {'~900 ms':>12}")
        print(f"{'body size':<40}  {size / 1e6:>9.1f} MB  {'11 MB':>12}")
    finally:
        if restd:
            restd.kill()
        subprocess.run([os.path.join(bin_dir, "slurm-local"), "stop", "--dir", cdir], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
