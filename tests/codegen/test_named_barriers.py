"""codegen/lower/named_barriers.py: in a warp-specialized kernel every barrier of the consumer role
is a named barrier of the consumers' threads (the producer warpgroup has returned), every other
barrier stays __syncthreads(); the emitter prints what the node says."""

from __future__ import annotations

from types import SimpleNamespace

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.ir import KernelIR, Loop, LoopKind, NamedSync, Sync, TmemFencedSync, WarpRoles, walk
from tileproof.codegen.lower.named_barriers import CONSUMER_BARRIER, name_barriers
from tileproof.execution.warp_roles import Role
from tileproof.model.expr import const

WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))


def _kernel(body: list) -> KernelIR:
    return KernelIR("k", [], [], body, [], (const(128), const(3), const(1)), (const(4), const(1), const(1)),
                    const(0), {})


def _roles():
    """Barriers before the split, in the producer, in the consumers' loop and after it."""
    loop = Loop("i", const(8), LoopKind.SERIAL, "K", body=[Sync("in the loop", fence_async=True)])
    roles = WarpRoles(WS, [Role(True, [Sync("producer")]), Role(False, [loop, Sync("after the loop")])],
                      consumer_threads=256)
    return [Sync("before the roles"), TmemFencedSync("fenced"), roles]


def test_the_consumers_barriers_are_named_and_no_other():
    body = _roles()
    name_barriers(SimpleNamespace(kernel=_kernel(body)))
    roles = body[2]
    producer, consumer = roles.body
    inside = [n for n in walk(consumer.body) if isinstance(n, Sync)]
    assert len(inside) == 2 and all(type(n) is NamedSync for n in inside)
    assert {(n.barrier, n.threads) for n in inside} == {(CONSUMER_BARRIER, 256)}
    assert inside[0].why == "in the loop" and inside[0].fence_async  # the rest of the Sync is kept
    assert [type(n) for n in body[:2] + producer.body] == [Sync, TmemFencedSync, Sync]


def test_the_emitter_prints_the_barrier_the_node_names():
    ir = _kernel(_roles())
    name_barriers(SimpleNamespace(kernel=ir))
    source = emit(ir, cuda_headers=False)
    consumer = source.split("return;", 1)[1]
    assert consumer.count('asm volatile("bar.sync 1, 256;" ::: "memory");') == 2 and "__syncthreads()" not in consumer
    assert "tp_fence_async_smem();" in consumer
    assert source.split("return;", 1)[0].count("__syncthreads()") == 3  # before the roles, fenced, the producer's
