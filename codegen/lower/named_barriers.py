"""Which barrier each Sync is: __syncthreads(), or a named barrier of the consumer warpgroups.

A warp-specialized kernel's producer warpgroup runs its loads and returns (codegen/lower/
warp_roles.py); __syncthreads() after that would wait for threads that have left. So every
Sync of the consumer role becomes a NamedSync: `bar.sync 1, N` with N the consumer role's
threads (barrier 0 is the one __syncthreads() uses). PTX ISA, bar.sync: the thread
count is a multiple of the warp size, and every warp that takes part executes the instruction.
"""

from __future__ import annotations

from dataclasses import fields

from ...hw.threads import CONSUMER_BARRIER
from ..ir import NamedSync, Sync, WarpRoles


def name_barriers(st) -> None:
    _roles(st.kernel.body)


def _roles(nodes: list) -> None:
    for n in nodes:
        if isinstance(n, WarpRoles):
            _producer, consumer = n.body
            _consumers(consumer.body, n.consumer_threads)
        elif hasattr(n, "body"):
            _roles(n.body)


def _consumers(nodes: list, threads: int) -> None:
    for k, n in enumerate(nodes):
        if type(n) is Sync:
            nodes[k] = NamedSync(**{f.name: getattr(n, f.name) for f in fields(Sync)},
                                 barrier=CONSUMER_BARRIER, threads=threads)
        elif hasattr(n, "body"):
            _consumers(n.body, threads)
