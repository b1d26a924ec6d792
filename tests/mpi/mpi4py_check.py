#!/usr/bin/env python3
"""mpi4py at its default thread level (MPI_THREAD_MULTIPLE), as Python users run it.

comm.Allreduce on numpy arrays (several dtypes and ops, 1 element to 1 MiB, normal and
in place), comm.allreduce on Python objects, comm.Iallreduce (one, and several
outstanding at once completed with MPI.Request.Waitall), the same on a Dup of world,
and two Python threads each on a communicator of its own. Every result is checked.
The runner checks that gpurdma set up the communicators (its verbose line) and
declined none.

Usage: mpirun -np N python3 mpi4py_check.py
"""
import sys
import threading

import mpi4py

import numpy as np

passed = 0
failures = []


def check(ok, what):
    global passed
    if ok:
        passed += 1
    else:
        failures.append(what)


def expected(base, size, op):
    """Rank r contributes base + r; the reduction over ranks 0..size-1."""
    if op == "sum":
        return base * size + size * (size - 1) // 2
    if op == "max":
        return base + (size - 1)
    return base  # min


def run_arrays(MPI, comm, tag):
    rank, size = comm.Get_rank(), comm.Get_size()
    ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
    for dtype in (np.float64, np.float32, np.int32, np.int64):
        for count in (1, 1000, (1 << 20) // np.dtype(dtype).itemsize):
            base = np.arange(count, dtype=np.int64) % 1000
            for name, op in ops.items():
                send = (base + rank).astype(dtype)
                want = expected(base, size, name).astype(dtype)
                recv = np.full(count, -7, dtype=dtype)
                comm.Allreduce(send, recv, op=op)
                check(np.array_equal(recv, want), f"{tag} Allreduce {dtype.__name__} {name} count {count}")
                inplace = send.copy()
                comm.Allreduce(MPI.IN_PLACE, inplace, op=op)
                check(np.array_equal(inplace, want), f"{tag} Allreduce IN_PLACE {dtype.__name__} {name} count {count}")


def run_objects(MPI, comm, tag):
    rank, size = comm.Get_rank(), comm.Get_size()
    check(comm.allreduce(rank, op=MPI.SUM) == size * (size - 1) // 2, f"{tag} allreduce(int)")
    check(comm.allreduce(rank + 0.5, op=MPI.MAX) == size - 0.5, f"{tag} allreduce(float, MAX)")
    check(comm.allreduce([rank]) == list(range(size)), f"{tag} allreduce(list) (concatenation)")


def run_nonblocking(MPI, comm, tag):
    rank, size = comm.Get_rank(), comm.Get_size()
    count = 4096
    base = np.arange(count, dtype=np.int64) % 1000
    send = (base + rank).astype(np.float64)
    recv = np.zeros(count)
    comm.Iallreduce(send, recv, op=MPI.SUM).Wait()
    check(np.array_equal(recv, expected(base, size, "sum").astype(np.float64)), f"{tag} Iallreduce + Wait")
    # Several outstanding at once, different sizes and ops.
    # The send buffers are kept alive until the requests complete.
    reqs, sends, outs, wants = [], [], [], []
    for k in range(8):
        n = (1, 100, 4096, 65536)[k % 4]
        b = np.arange(n, dtype=np.int64) % 1000 + k
        s = (b + rank).astype(np.int32)
        r = np.zeros(n, dtype=np.int32)
        op, name = (MPI.SUM, "sum") if k % 2 == 0 else (MPI.MAX, "max")
        reqs.append(comm.Iallreduce(s, r, op=op))
        sends.append(s)
        outs.append(r)
        wants.append(expected(b, size, name).astype(np.int32))
    MPI.Request.Waitall(reqs)
    for k, (r, w) in enumerate(zip(outs, wants)):
        check(np.array_equal(r, w), f"{tag} Iallreduce {k} of 8 outstanding")


def run_threads(MPI, comm):
    """Two threads, each on a Dup of its own, at once."""
    comms = [comm.Dup() for _ in range(2)]
    results = [None, None]

    def work(i):
        c = comms[i]
        rank, size = c.Get_rank(), c.Get_size()
        ok = True
        for k in range(50):
            n = (1, 1000, 65536)[k % 3]
            b = np.arange(n, dtype=np.int64) % 1000 + k + i
            s = (b + rank).astype(np.float64)
            r = np.zeros(n)
            if k % 2:
                c.Iallreduce(s, r, op=MPI.SUM).Wait()
            else:
                c.Allreduce(s, r, op=MPI.SUM)
            ok &= np.array_equal(r, expected(b, size, "sum").astype(np.float64))
        results[i] = ok

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        check(results[i] is True, f"thread {i}: 50 calls on its own communicator")
    for c in comms:
        c.Free()


def main():
    level = mpi4py.rc.thread_level
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    provided = MPI.Query_thread()
    if rank == 0:
        print(f"mpi4py {mpi4py.__version__}, rc.thread_level {level!r}, provided "
              f"{'MPI_THREAD_MULTIPLE' if provided == MPI.THREAD_MULTIPLE else provided}", flush=True)
    check(level == "multiple", f"mpi4py.rc.thread_level is {level!r}, not the default 'multiple'")
    run_arrays(MPI, comm, "world")
    run_objects(MPI, comm, "world")
    run_nonblocking(MPI, comm, "world")
    dup = comm.Dup()
    run_arrays(MPI, dup, "dup")
    run_nonblocking(MPI, dup, "dup")
    dup.Free()
    if provided == MPI.THREAD_MULTIPLE:
        run_threads(MPI, comm)

    for what in failures[:5]:
        print(f"FAIL [world rank {rank}] {what}", flush=True)
    counts = np.array([passed, len(failures)], dtype=np.int64)
    totals = np.zeros(2, dtype=np.int64)
    comm.Allreduce(counts, totals, op=MPI.SUM)
    if rank == 0:
        print(f"mpi4py_check: {totals[0]} passed, {totals[1]} failed", flush=True)
    return 1 if totals[1] else 0


if __name__ == "__main__":
    sys.exit(main())
