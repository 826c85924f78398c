"""Where work runs when one machine is not enough: a Dask cluster (`--cluster ADDRESS`).

ADDRESS is a running `dask.distributed` scheduler (`tcp://HOST:8786`), or `local:N`, which starts a
LocalCluster of N single-threaded worker processes on this machine. Dask is imported here only, and only
once a cluster is asked for: a run without --cluster imports none of it.

Timings taken on a worker must be of the run's CPU, so `check_workers` asks every worker which target key
its host gives and refuses the run where one differs, and a task checks again on the worker that runs it
(`require_key`: a worker may join after the check). Timings on one host never overlap: each worker's measurer
holds the machine-wide lock (`host_lock.py`) as a local run's does, so two workers on one host take turns.
Results come back to the client, which alone writes them (one writer; the folders' locks and resume hold).
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from ..core.errors import ClusterError

T = TypeVar("T")
CONNECT_TIMEOUT_S = 30
# Dask retries a task that raised this many times (a worker that dies mid-task is counted apart: the
# scheduler gives its task to another worker, up to `distributed.scheduler.allowed-failures` deaths)
RETRIES = 2


# a worker's statistical profiler wakes every 10 ms to sample its threads: beside a timing that takes every core
# of the host, that is a stall (contention.py); workers of a scheduler started elsewhere: docs/scale.md
QUIET_WORKERS = {"distributed.worker.profile.enabled": False}


@dataclass(frozen=True)
class ClusterAddress:
    """A parsed --cluster: `local_workers` N for `local:N` (a LocalCluster started here), else None and
    `scheduler` the address of a running scheduler."""

    text: str
    local_workers: int | None = None

    @property
    def scheduler(self) -> str | None:
        return None if self.local_workers is not None else self.text


def parse_cluster(text: str) -> ClusterAddress:
    """`local:N` (N >= 1) or a scheduler address (`tcp://host:port`, `host:port`, `tls://...`)."""
    text = text.strip()
    m = re.fullmatch(r"local:(\d+)", text)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise ClusterError(f"--cluster: local:N needs 1 or more workers, got {text!r}")
        return ClusterAddress(text, n)
    if text.startswith("local"):
        raise ClusterError(f"--cluster: expected local:N (N workers on this machine), got {text!r}")
    if not re.fullmatch(r"([a-z]+://)?[\w.\-\[\]:]+:\d+", text):
        raise ClusterError(f"--cluster: expected local:N or a Dask scheduler address such as tcp://HOST:8786, "
                           f"got {text!r}")
    return ClusterAddress(text)


@contextmanager
def connect(address: ClusterAddress) -> Iterator[object]:
    """A `dask.distributed.Client` of the cluster (a LocalCluster started for `local:N`, closed on exit)."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError as err:
        raise ClusterError(f"--cluster needs Dask ({err}): pip install 'schedrec[cluster]'") from None
    cluster = None
    try:
        if address.local_workers is not None:
            with dask.config.set(QUIET_WORKERS):
                cluster = LocalCluster(n_workers=address.local_workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(address.scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as err:
        if cluster is not None:
            cluster.close()
        raise ClusterError(f"no Dask scheduler answers at {address.text} ({type(err).__name__}: "
                           f"{str(err).splitlines()[0] if str(err) else ''})") from None
    try:
        if not client.scheduler_info().get("workers"):
            try:
                client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
            except TimeoutError:
                raise ClusterError(f"the Dask scheduler at {address.text} has no workers") from None
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


@functools.cache
def host_key() -> str:
    """The target key of the host this process runs on (once per process: it asks LLVM)."""
    from ..target.spec import native_target
    return native_target().key


def check_workers(client: object, key: str) -> dict[str, str]:
    """{worker address: its host's target key}; a ClusterError naming the workers whose key is not `key`."""
    keys = client.run(host_key)
    wrong = {w: k for w, k in keys.items() if k != key}
    if wrong:
        first, theirs = next(iter(wrong.items()))
        raise ClusterError(f"{len(wrong)} of {len(keys)} Dask workers are not the run's target {key} ({first} is "
                           f"{theirs}): timings must run on the target CPU; start those workers on {key} hosts, "
                           f"or measure for {theirs} with --target native on them")
    return keys


def require_key(key: str) -> None:
    """On a worker, before a task measures: refuse to time for another CPU than this host's."""
    mine = host_key()
    if mine != key:
        raise ClusterError(f"Dask worker {worker_name()} is {mine}, not the run's target {key}: timings must run "
                           f"on the target CPU")


def worker_name() -> str:
    """This Dask worker's address ("client" outside a worker)."""
    try:
        from dask.distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return "client"


def run_tasks(client: object, fn: Callable[[T], object], tasks: Iterable[T], window: int,
              before_submit: Callable[[], None] = lambda: None, retries: int = RETRIES) -> Iterator[tuple[T, object]]:
    """Yield (task, fn(task)) as the tasks finish on the cluster, keeping at most `window` submitted and not
    yet yielded (so a stopped client leaves little measured and unwritten); `before_submit` runs before each
    submission (e.g. wait while the bank is PAUSEd). A task's own error is raised here as it was raised on
    the worker; a task that killed workers becomes a ClusterError."""
    from dask.distributed import as_completed
    from distributed import KilledWorker
    todo = iter(tasks)
    outstanding: dict[str, tuple[object, T]] = {}  # future key -> (future, task)
    done = as_completed()

    def submit_next() -> bool:
        task = next(todo, None)
        if task is None:
            return False
        before_submit()
        future = client.submit(fn, task, pure=False, retries=retries)
        outstanding[future.key] = (future, task)
        done.add(future)
        return True

    for _ in range(max(1, window)):
        if not submit_next():
            break
    try:
        for future in done:
            _, task = outstanding.pop(future.key)
            try:
                result = future.result()
            except KilledWorker as err:
                where = getattr(getattr(err, "last_worker", None), "address", "its")
                raise ClusterError(f"a task killed {where} worker and every worker that took it over; the rows "
                                   f"written so far are kept: rerun to resume") from None
            yield task, result
            submit_next()
    finally:
        if outstanding:  # stopped early: what is still queued or running is dropped, not left to the cluster
            client.cancel([f for f, _ in outstanding.values()])
