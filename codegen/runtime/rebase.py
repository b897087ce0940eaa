"""A prepared launch for arrays at new addresses whose signature a launch was prepared for.

Kernel.run keeps a PreparedLaunch per argument signature, each array's address included
(codegen/compile.py). Everything else a launch packs depends only on the signature without the
addresses (shape, strides, dtype, device; the sizes; the stream): the bound sizes, the checked
launch configuration, the allocated outputs' slots. A call with fresh arrays of a known signature
(an activation allocated anew each step, split-K's partials between its two kernels) is rebased
from the launch prepared first: its pointer parameters and tensor maps written for the new
addresses, after the checks that depend on an address (alignment for the vector accesses, no
output overlapping an input), with the same InputErrors as the full binding's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Callable

from ..ir import KernelIR, ParamKind
from .binding import check_alignment, check_no_alias
from .prepared import OutputSlot, PreparedLaunch


def unaddressed(key: tuple) -> tuple:
    """A launch key (codegen/compile.py _launch_key) without its arrays' addresses."""
    ins, outs, sizes, stream = key
    return (tuple(s[1:] for s in ins), None if outs is None else tuple(s[1:] for s in outs), sizes, stream)


def addresses(key: tuple) -> tuple[list[int], list[int] | None]:
    ins, outs = key[0], key[1]
    return [s[0] for s in ins], None if outs is None else [s[0] for s in outs]


@dataclass
class LaunchTemplate:
    """What a prepared launch packed for one unaddressed signature: the arguments in parameter
    order (value, ctype), the outputs' slots (None for out=) and the launch's configuration."""

    function: Any
    grid: tuple
    block: tuple
    smem: int
    stream: int
    device_id: int
    args: list[tuple[Any, Any]]
    slots: list[OutputSlot] | None
    env: dict[str, int]
    explain: Callable[[Exception], Exception]
    generation: int
    cooperative: bool
    dependent: bool


def rebase(ir: KernelIR, template: LaunchTemplate, ins: list[int], outs: list[int] | None,
           tensor_map: Callable[[Any, int, dict[str, int]], Any]) -> PreparedLaunch:
    """The template's launch with the inputs at `ins` (and out= at `outs`), addresses in the
    kernel's input (output) order; tensor_map(map, address, env) encodes one (Kernel._tensor_map)."""
    inputs = [g for g in ir.globals if g.is_input]
    outputs = [g for g in ir.globals if not g.is_input]
    at = {g.name: p for g, p in zip(inputs, ins)}
    for k, g in enumerate(inputs):
        check_alignment(g, SimpleNamespace(ptr=at[g.name]), k)
    for v in ir.views:  # a view is read at its input's address, with its own vectors
        k = next(k for k, g in enumerate(inputs) if g.name == v.view_of)
        check_alignment(replace(inputs[k], vector_elements=v.vector_elements), SimpleNamespace(ptr=at[v.view_of]), k)
        at[v.name] = at[v.view_of]
    if outs is not None:
        for k, (g, p) in enumerate(zip(outputs, outs)):
            check_alignment(g, SimpleNamespace(ptr=p), k)
            at[g.name] = p
        check_no_alias([SimpleNamespace(ptr=i) for i in ins], [SimpleNamespace(ptr=o) for o in outs])
    maps = {m.param: m for m in ir.tensor_maps}
    args = list(template.args)
    for k, p in enumerate(ir.params):
        if p.tensor not in at:
            continue
        if p.kind is ParamKind.TENSOR:
            args[k] = (at[p.tensor], args[k][1])
        elif p.kind is ParamKind.TENSOR_MAP:
            args[k] = (tensor_map(maps[p.name], at[p.tensor], template.env), None)
    return PreparedLaunch(template.function, template.grid, template.block, template.smem, template.stream,
                          template.device_id, args, template.slots, template.explain, template.generation,
                          template.cooperative, template.dependent)


__all__ = ["LaunchTemplate", "addresses", "rebase", "unaddressed"]
