"""Pass a ball around a ring of MPI ranks; each rank reports its node.

Rank 0 sends a counter to rank 1, each rank adds one and passes it on, and
the ball returns to rank 0; after ROUNDS rounds the counter must equal
ROUNDS * size. Every rank reports SLURMD_NODENAME so a test can check that
the ranks ran on different nodes.
"""
import os
import socket
import sys
import time

from mpi4py import MPI

ROUNDS = 5

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
print(f"Hello from rank {rank} of {size} on {socket.gethostname()}", flush=True)
comm.Barrier()

start = time.time()
ball = 0
for r in range(ROUNDS):
    if size == 1:
        ball += 1
    elif rank == 0:
        comm.send(ball + 1, dest=1)
        ball = comm.recv(source=size - 1)
        print(f"round {r}: ball came back to rank 0 with value {ball}", flush=True)
    else:
        ball = comm.recv(source=rank - 1)
        comm.send(ball + 1, dest=(rank + 1) % size)
elapsed = (time.time() - start) * 1000

nodes = comm.gather(os.environ.get("SLURMD_NODENAME", "?"), root=0)
if rank == 0:
    for i, n in enumerate(nodes):
        print(f"rank {i}: host={socket.gethostname()} slurm_node={n}", flush=True)
    expected = ROUNDS * size
    ok = ball == expected
    print(f"ring of {size} ranks, {ROUNDS} rounds: final ball={ball} expected={expected} "
          f"{'OK' if ok else 'FAIL'} in {elapsed:.2f} ms", flush=True)
    sys.exit(0 if ok else 1)
