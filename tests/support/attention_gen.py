"""Random attention schedules, for the fuzzer's attention family (benchmarks/fuzz.py): O =
softmax(Q K^T scale [+ Mask]) V built by an attention recipe of tileproof.recipes.attention
(RECIPES: one entry per recipe function, its tile class and the ranges of its parameters and
options) with random parameters, then now and then changed through the public API the way a user
could get it wrong. The recipe stays the one source of the schedule: a mutation only edits what
the recipe built.

A draw: the tile's parameters over their valid ranges (rows, with tails past whole blocks; keys,
whole key tiles, a tail or as many as the rows; head dims 64 and 128, 192 and 256 rarely; value
dims; batch x key / value heads, grouped query heads, a scale or the default; attention()'s key
tile, K / V stages 1 to 4, producer warpgroup, setmaxnreg counts, consumer warpgroups, the lse
output, O rescaled in place, and either an additive mask, whose values the case names: causal,
-inf at random with each row's first key kept, or a finite bias, or the causal predicate
(AttentionTile(causal=True), rows <= keys) with or without skip_masked_tiles, and ping-pong behind a
producer); now and then one
drawn out of its range (among them causal with more rows than keys, or with a mask), which the
recipe must refuse with tp.ScheduleError (the case records it, then builds with that parameter
drawn again in range; any other outcome goes to `api_bugs`, which the fuzzer counts as internal
errors). A causal tile computing every tile skips them through TensorView.skip_masked with a trip
count drawn from _skip_counts (the recipe's, or one too short or too long) in SKIP_COUNT_RATE of
its draws. Then 0 to 2 mutations (MUTATIONS): a
fragment's thread digits permuted (a row reduction's quad, a row's warp and group digits), a
fragment's quads merged onto TIDx{128}, two loop axes swapped, a fragment's registers permuted,
another inline position, a macro whose N is not the tile's (or an mma.sync macro), an operand
moved to another memory, a TMA box axis made a loop, a register axis vectorized or unrolled, two
parallel types swapped, a parallel axis unbound, a serial one bound to a thread axis, masked key
tiles skipped with a drawn count (refused where the recipe skips them already). A mutation
the API refuses (tp.ScheduleError) is recorded and the schedule kept as it is; any other
exception goes to `api_bugs`. Which verdict a mutation gets is the verifier's to say: an accepted
one must then compute the same O on the GPU (benchmarks/fuzz.py --run). Every call with one seed
builds the same schedule. Imports the public API and the recipes only.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import tileproof as tp
from tileproof.recipes.attention import AttentionTile, attention, one_tile_attention

P = tp.ParallelType
THREADS = (P.TIDx, P.TIDy, P.TIDz)
MUTATION_RATE = 0.7  # cases with at least one mutation
OUT_OF_RANGE_RATE = 0.15  # cases that first try one parameter out of its range
MASKS = ("causal", "random", "bias")  # a masked tile's Mask: recipes.attention.causal_mask, -inf at random, finite


@dataclass
class AttentionCase:
    fusion: tp.Fusion
    tile: object  # the recipe's tile (AttentionTile): what the GPU run's reference computes
    recipe: str
    target: str = "sm_90a"
    steps: list[str] = field(default_factory=list)
    mutations: list[str] = field(default_factory=list)  # the mutations' names, in order
    api_bugs: list[str] = field(default_factory=list)  # a refusal that was not tp.ScheduleError, or none
    mask: str | None = None  # a masked tile's Mask values (MASKS), for the GPU run
    options: dict = field(default_factory=dict)  # the recipe's options as drawn (stages, warpgroups, lse, ...)

    def __repr__(self) -> str:
        return f"AttentionCase({self.recipe}: {'; '.join(self.steps)})"


# -- the recipes and their parameters --------------------------------------------------------------


@dataclass(frozen=True)
class Parameter:
    """One parameter: `valid(rng, drawn)` draws a value in its range, `invalid(rng, drawn)` one
    outside it, or NONE where every value is in range (`drawn`: the parameters before it, for a
    range that depends on them)."""

    name: str
    valid: Callable[[random.Random, dict], object]
    invalid: Callable[[random.Random, dict], object]


NONE = object()  # Parameter.invalid's answer where no value is out of range


@dataclass(frozen=True)
class Recipe:
    """An attention recipe: `build(tile(**parameters), **options)` -> a scheduled fusion."""

    build: Callable
    tile: type
    parameters: tuple[Parameter, ...]
    options: tuple[Parameter, ...] = ()

    def make(self, drawn: dict) -> tuple[object, tp.Fusion]:
        tile = self.tile(**{p.name: drawn[p.name] for p in self.parameters})
        return tile, self.build(tile, **{p.name: drawn[p.name] for p in self.options})

    def shown(self, tile, drawn: dict) -> str:
        return ", ".join([repr(tile)] + [f"{p.name}={drawn[p.name]!r}" for p in self.options])


def _grid_axis(rng: random.Random, drawn: dict) -> int:
    """A grid dimension (blockIdx.y or z): small mostly, now and then at its limit."""
    return rng.choice([65535, 65535 - rng.randint(1, 64)]) if rng.random() < 0.03 else rng.choice([1, 1, 2, 3, 4, 6, 8])


def _rows(rng: random.Random, drawn: dict) -> int:
    """Whole 64-row blocks mostly, any count now and then (the last block's rows past it are not stored)."""
    if rng.random() < 0.2:
        return max(2, rng.randint(1, 400))  # one row is a broadcast axis: AttentionTile refuses it
    return 64 * (rng.randint(1, 6) if rng.random() < 0.9 else rng.randint(7, 24))


ONE_TILE = (
    Parameter("rows", _rows, lambda rng, _: rng.choice([0, 1, -1, 64.0, "128", True])),
    Parameter("keys", lambda rng, _: 16 * rng.randint(1, 16), lambda rng, _: rng.choice([0, 8, 24, 41, 272, 512, -16])),
    Parameter("head_dim", lambda rng, _: rng.choice([64, 128]) if rng.random() < 0.94 else rng.choice([192, 256]),
              lambda rng, _: rng.choice([16, 32, 96, 320, 512])),
    Parameter("value_dim", lambda rng, _: 64 * rng.randint(1, 4),
              lambda rng, _: rng.choice([0, 16, 32, 96, 320, 512])),
    Parameter("batch", _grid_axis, lambda rng, _: rng.choice([0, -1, 65536, True, 2.0])),
    Parameter("group", _grid_axis, lambda rng, _: rng.choice([0, -2, 65536, 1 << 20, False])),
    Parameter("scale", lambda rng, _: None if rng.random() < 0.5 else round(rng.uniform(0.02, 2.0), 3),
              lambda rng, _: rng.choice([0, 0.0, -0.125, -1, float("nan"), "0.125"])),
    Parameter("masked", lambda rng, _: False, lambda rng, _: True),  # a mask needs attention()
    Parameter("causal", lambda rng, _: False, lambda rng, _: True),  # so does the causal predicate
)


def _keys(rng: random.Random, drawn: dict) -> int:
    """Whole key tiles mostly; now and then a tail (any count), or as many keys as rows (M == N)."""
    u = rng.random()
    if u < 0.15:
        return drawn["rows"]
    return rng.randint(2, 8 * drawn["key_tile"]) if u < 0.3 else drawn["key_tile"] * rng.randint(1, 8)


def _rows_out_of_range(rng: random.Random, drawn: dict):
    """A causal tile's rows past its keys (queries that see no key), else a row count of no kind."""
    if drawn.get("causal") and rng.random() < 0.5:
        return drawn["keys"] + rng.randint(1, 64)
    return ONE_TILE[0].invalid(rng, drawn)


def _keys_out_of_range(rng: random.Random, drawn: dict):
    """A causal tile's keys fewer than its rows, else a key count of no kind."""
    if drawn.get("causal") and drawn["rows"] > 1 and rng.random() < 0.5:
        return rng.randint(1, drawn["rows"] - 1)
    return rng.choice([0, 1, -drawn["key_tile"], -1, True, "256", 2.0 * drawn["key_tile"]])


def _causal_out_of_range(rng: random.Random, drawn: dict):
    """Causal with a Mask input, or with more rows than keys (AttentionTile refuses both), else no bool."""
    return True if drawn["masked"] or drawn["rows"] > drawn["keys"] else rng.choice([1, "yes", None])


def _persistent(rng: random.Random, drawn: dict):
    """None (one block a tile) in 70% of the draws; else 1-9 blocks, or for a causal tile 1-3 blocks a
    head, drawn from the case's parameters so far (the causal draws leave `rng`'s stream as it was
    before causal grids could be persistent, and with it every later draw of the seed)."""
    if drawn["causal"]:
        sub = random.Random(repr(sorted(drawn.items())))
        heads = max(drawn["batch"], 1) * max(drawn["group"], 1)
        return None if sub.random() < 0.7 else heads * sub.randint(1, 3)
    return None if rng.random() < 0.7 else rng.randint(1, 9)


def _persistent_out_of_range(rng: random.Random, drawn: dict):
    """No block count, or for a causal tile of several heads one that is not a multiple of them."""
    heads = max(drawn["batch"], 1) * max(drawn["group"], 1)
    if drawn["causal"]:  # (rng untouched, as _persistent)
        return heads + 1 if heads > 1 else 0
    return rng.choice([0, -2, True, 2.0])


def _q_stages(rng: random.Random, drawn: dict) -> int:
    """2 or 3 in half the draws with a producer and a persistent grid, else 1, drawn from the case's
    parameters so far (`rng` untouched: the draws after it, the mutations, stay as they were)."""
    if not (drawn["producer"] and drawn["persistent"]):
        return 1
    sub = random.Random("q_stages:" + repr(sorted(drawn.items())))
    return 1 if sub.random() < 0.5 else sub.choice([2, 3])


def _q_stages_out_of_range(rng: random.Random, drawn: dict):
    """Q from the producer without a producer or a persistent grid (refused at the call), or no count."""
    if not (drawn["producer"] and drawn["persistent"]):
        return 2
    return random.Random("q_stages:" + repr(sorted(drawn.items()))).choice([0, True, 2.0])


def _tma_store(rng: random.Random, drawn: dict) -> bool:
    """O through shared memory (stmatrix, a TMA store a box) in a third of the draws, drawn from the
    case's parameters so far (`rng` untouched: the draws after it stay as they were)."""
    return random.Random("tma_store:" + repr(sorted(drawn.items()))).random() < 0.3


def _tma_store_out_of_range(rng: random.Random, drawn: dict):
    """Not a bool: refused at the call."""
    return random.Random("tma_store:" + repr(sorted(drawn.items()))).choice([1, "yes", None])


KEY_TILES = (  # attention(): keys in tiles of key_tile, the online softmax
    Parameter("rows", _rows, _rows_out_of_range),
    Parameter("key_tile", lambda rng, _: 16 * rng.randint(1, 16),
              lambda rng, _: rng.choice([0, 8, 24, 272, -16, 64.0])),
    Parameter("keys", _keys, _keys_out_of_range),
    *ONE_TILE[2:-2],
    Parameter("masked", lambda rng, _: rng.random() < 0.3,
              lambda rng, _: rng.choice([1, 0, "yes", None])),
    Parameter("causal", lambda rng, drawn: not drawn["masked"] and drawn["rows"] <= drawn["keys"]
              and rng.random() < 0.6, _causal_out_of_range),
)
SETMAXNREG = [None, (40, 232), (24, 240), (40, 256), (24, 256)]  # (producer, consumers); None: no setmaxnreg
KEY_TILE_OPTIONS = (  # attention()'s K / V pipeline
    Parameter("stages", lambda rng, _: rng.choice([1, 1, 2, 3, 4]), lambda rng, _: rng.choice([0, -1, True, 2.0])),
    Parameter("producer", lambda rng, drawn: drawn["stages"] > 1 and rng.random() < 0.5,
              lambda rng, drawn: True if drawn["stages"] == 1 else NONE),
    Parameter("registers", lambda rng, drawn: rng.choice(SETMAXNREG) if drawn["producer"] else None,
              lambda rng, drawn: (40, 232) if drawn["stages"] == 1 else NONE),
    Parameter("warpgroups", lambda rng, _: rng.choice([1, 1, 2, 2, 3, 4]),
              lambda rng, _: rng.choice([0, 5, True, 2.0])),
    Parameter("lse", lambda rng, _: rng.random() < 0.25, lambda rng, _: rng.choice([1, "yes", None])),
    Parameter("in_place", lambda rng, _: rng.random() < 0.3, lambda rng, _: rng.choice([1, "yes", None])),
    Parameter("skip_masked_tiles", lambda rng, drawn: rng.random() < 0.5 if drawn["causal"] else True,
              lambda rng, _: rng.choice([0, "no", None])),
    # the consumer warpgroups in turn (WS-PING-PONG refuses one warpgroup); without a producer: refused at the call
    Parameter("ping_pong", lambda rng, drawn: drawn["producer"] and rng.random() < 0.4,
              lambda rng, drawn: True if not drawn["producer"] else rng.choice([1, "yes", None])),
    # FlashAttention-3's intra-warpgroup overlap (the loop rotated): a producer and O in place, with or
    # without ping-pong
    Parameter("overlap", lambda rng, drawn: drawn["producer"] and drawn["in_place"] and rng.random() < 0.5,
              lambda rng, drawn: True if not (drawn["producer"] and drawn["in_place"])
              else rng.choice([1, "yes", None])),
    # a persistent grid of that many blocks over the row tiles; causal: a multiple of the heads (each head's
    # row tiles on that many blocks over the heads), another number refused at the call
    Parameter("persistent", _persistent, _persistent_out_of_range),
    # the softmax's elementwise chain, P's cast and the row sum in one loop a thread, each alone, or the default
    Parameter("fused_softmax", lambda rng, _: rng.choice([None, True, False]), lambda rng, _: rng.choice([1, "yes", 0])),
    # Q loaded by the producer over a persistent block's row tiles, in that many stages (1: the consumers load it)
    Parameter("q_stages", _q_stages, _q_stages_out_of_range),
    # O written through shared memory (refused by the verifier at a row tail: stmatrix is warp-collective)
    Parameter("tma_store", _tma_store, _tma_store_out_of_range),
)

# One entry per recipe function: another recipe is one more line.
RECIPES: dict[str, Recipe] = {
    "one_tile_attention": Recipe(one_tile_attention, AttentionTile, ONE_TILE),
    "attention": Recipe(attention, AttentionTile, KEY_TILES, KEY_TILE_OPTIONS),
}


def _small_enough(params: dict) -> bool:
    """A grid at its limit only with the smallest tiles: the GPU run's arrays stay under ~1 GB."""
    big = max(params["batch"], 1) * max(params["group"], 1)
    return big <= 64 or (params["rows"] == 64 and params["keys"] <= 32 and params["head_dim"] == 64
                         and params["value_dim"] == 64 and big <= 65535)


def _draw_params(rng: random.Random, recipe: Recipe) -> dict:
    for _ in range(100):
        params: dict = {}
        for p in recipe.parameters + recipe.options:
            params[p.name] = p.valid(rng, params)
        if _small_enough(params):
            return params
    raise RuntimeError(f"no tile small enough in 100 draws of {recipe.build.__name__}")


# -- the schedule's parts, found in the fusion ------------------------------------------------------


@dataclass
class Roles:
    """The recipe's tensors by what they do, found from the fusion's dataflow (not by name)."""

    products: list  # MmaOp outputs (their op has a macro)
    shared_operands: list  # MmaOp inputs in shared memory (TMA tiles)
    register_operands: list  # MmaOp inputs in registers (P as the second product's A)
    fragments: list  # computed tensors off shared memory laid out on threads: row reductions, row vectors, tiles
    computed: list  # every tensor the kernel computes
    tile: object = None  # the recipe's tile and options, for a mutation that recomputes what the recipe did
    options: dict = field(default_factory=dict)


def roles(fusion: tp.Fusion, tile=None, options=None) -> Roles:
    computed = [t for t in fusion.tensors if not t.is_fusion_input]
    products = [t for t in computed if t.definition is not None and t.definition.macro is not None]
    operands = [i for t in products for i in t.definition.inputs]
    fragments = [t for t in computed if t not in products and t.memory_type is not tp.MemoryType.Shared
                 and any(i.parallel_type in THREADS for i in t.get_loop_domain())]
    return Roles(products, [t for t in operands if t.memory_type is tp.MemoryType.Shared],
                 [t for t in operands if t.memory_type is tp.MemoryType.Local], fragments, computed,
                 tile, dict(options or {}))


def _free(t) -> list[int]:
    """Loop positions a transform may touch: past the tensor's compute-at position."""
    return list(range(t.compute_at, len(t.get_loop_domain())))


def _pick_axis(rng, tensors, wanted) -> tuple | None:
    """A random (tensor, position) among `tensors`' free axes for which `wanted(axis)` holds."""
    found = [(t, k) for t in tensors for k in _free(t) if wanted(t.axis(k))]
    return rng.choice(found) if found else None


# -- mutations: each edits the built schedule and returns what it did, or None where it has no target --


def _thread_digits(rng, r: Roles):
    """A thread axis split in two digits, swapped and merged back: a row's warp and group digits
    (TIDy{32} = 8 w + g as 4 g + w) or a quad's two lanes bits (TIDx{4}) in another order."""
    hit = _pick_axis(rng, r.fragments, lambda i: i.parallel_type in THREADS and (i.static_extent or 0) >= 4)
    if hit is None:
        return None
    t, k = hit
    kind, extent = t.axis(k).parallel_type, t.axis(k).static_extent
    factor = rng.choice([f for f in (2, 4, 8, 16) if extent % f == 0 and f < extent])
    t.axis(k).parallelize(P.Serial)
    t.split(k, factor).reorder({k: k + 1, k + 1: k}).merge(k)
    t.axis(k).parallelize(kind)
    return f"{t.name} axis {k} {kind.value}{{{extent}}} as ({extent // factor} x {factor}) swapped"


def _quads_merged(rng, r: Roles):
    """A fragment's TIDy{32} x TIDx{4} merged onto TIDx{128}: the fragment without quads."""
    found = [(t, k) for t in r.fragments for k in _free(t)[:-1]
             if t.axis(k).parallel_type is P.TIDy and t.axis(k + 1).parallel_type is P.TIDx]
    if not found:
        return None
    t, k = rng.choice(found)
    t.axis(k).parallelize(P.Serial)
    t.axis(k + 1).parallelize(P.Serial)
    t.merge(k)
    t.axis(k).parallelize(P.TIDx)
    return f"{t.name} axes {k}, {k + 1} (TIDy x TIDx) merged onto TIDx"


def _loop_order(rng, r: Roles):
    """Two free loop axes of one tensor swapped (a quad's axes in another order, say)."""
    found = [t for t in r.computed if len(_free(t)) >= 2]
    if not found:
        return None
    t = rng.choice(found)
    a, b = rng.sample(_free(t), 2)
    t.reorder({a: b, b: a})
    return f"{t.name} axes {a}, {b} swapped"


def _registers_permuted(rng, r: Roles):
    """A fragment's innermost serial axis split by 2 and its digits swapped: registers in another order."""
    found = [t for t in r.fragments + r.register_operands if _free(t)
             and t.axis(-1).parallel_type is P.Serial and (t.axis(-1).static_extent or 0) >= 4]
    if not found:
        return None
    t = rng.choice(found)
    t.split(-1, 2).reorder({-2: -1, -1: -2}).merge(-2)
    return f"{t.name} innermost registers permuted (2 hi + lo -> 2 lo + hi)"


def _inline_position(rng, r: Roles):
    t = rng.choice(r.computed)
    before = t.compute_at
    position = rng.choice([k for k in range(len(t.get_loop_domain()) + 1) if k != before])
    t.inline_at(position)
    return f"{t.name}.inline_at({position}) (was {before})"


def _macro(rng, r: Roles):
    """A product's macro replaced: a wgmma of another N, or an mma.sync macro."""
    if not r.products:
        return None
    t = rng.choice(r.products)
    current = t.definition.macro
    hopper = [m for m in tp.MmaMacro if m.name.startswith("Hopper") and m is not current]
    macro = rng.choice(hopper) if rng.random() < 0.85 else rng.choice([tp.MmaMacro.Ampere_16_8_16,
                                                                       tp.MmaMacro.Turing_16_16_16])
    t.definition.set_macro(macro)
    return f"{t.name}.definition.set_macro({macro.name}) (was {current.name})"


def _operand_memory(rng, r: Roles):
    """An MmaOp operand moved to another memory (K in registers, P in shared memory, ...)."""
    operands = r.shared_operands + r.register_operands
    if not operands:
        return None
    t = rng.choice(operands)
    memory = rng.choice([m for m in (tp.MemoryType.Local, tp.MemoryType.Shared, tp.MemoryType.Global)
                         if m is not t.memory_type])
    t.set_memory_type(memory)
    return f"{t.name}.set_memory_type({memory.name})"


def _box_axis_serial(rng, r: Roles):
    """A TMA tile's Bulk axis made a serial loop (smaller boxes, issued one after another)."""
    hit = _pick_axis(rng, r.shared_operands, lambda i: i.parallel_type is P.Bulk)
    if hit is None:
        return None
    t, k = hit
    t.axis(k).parallelize(P.Serial)
    return f"{t.name} axis {k} Bulk -> Serial"


def _vectorized(rng, r: Roles):
    """A fragment's innermost serial axis split and its inner part vectorized."""
    found = [t for t in r.fragments if _free(t) and t.axis(-1).parallel_type is P.Serial
             and not t.axis(-1).is_reduction and (t.axis(-1).static_extent or 0) >= 2]
    if not found:
        return None
    t = rng.choice(found)
    extent = t.axis(-1).static_extent
    width = rng.choice([w for w in (2, 4, 8) if extent % w == 0])
    t.split(-1, width)
    t.axis(-1).parallelize(P.Vectorize)
    return f"{t.name} innermost split by {width}, Vectorize"


def _unrolled(rng, r: Roles):
    hit = _pick_axis(rng, r.computed, lambda i: i.parallel_type is P.Serial and not i.is_broadcast)
    if hit is None:
        return None
    t, k = hit
    t.axis(k).parallelize(P.Unroll)
    return f"{t.name} axis {k} Unroll"


def _parallel_swap(rng, r: Roles):
    """Two bound axes of one tensor trade their parallel types (TIDy <-> TIDx, BIDx <-> TIDy, ...)."""
    found = []
    for t in r.computed:
        bound = [k for k in _free(t) if t.axis(k).parallel_type is not P.Serial and not t.axis(k).is_broadcast]
        found += [(t, a, b) for a in bound for b in bound if a < b
                  and t.axis(a).parallel_type is not t.axis(b).parallel_type]
    if not found:
        return None
    t, a, b = rng.choice(found)
    pa, pb = t.axis(a).parallel_type, t.axis(b).parallel_type
    t.axis(a).parallelize(pb)
    t.axis(b).parallelize(pa)
    return f"{t.name} axes {a}, {b}: {pa.value} <-> {pb.value}"


def _bound(rng, r: Roles):
    """A serial loop bound to a thread axis (an MmaOp's K steps across warpgroups, a register axis on TIDz, ...)."""
    hit = _pick_axis(rng, r.computed, lambda i: i.parallel_type is P.Serial and not i.is_broadcast)
    if hit is None:
        return None
    t, k = hit
    kind = rng.choice(THREADS)
    t.axis(k).parallelize(kind)
    return f"{t.name} axis {k} Serial -> {kind.value}"


def _unbound(rng, r: Roles):
    """A bound axis made serial (a row reduction's quad summed in one thread, an Mma axis a loop, ...)."""
    hit = _pick_axis(rng, r.computed, lambda i: i.parallel_type is not P.Serial and not i.is_broadcast)
    if hit is None:
        return None
    t, k = hit
    before = t.axis(k).parallel_type
    t.axis(k).parallelize(P.Serial)
    return f"{t.name} axis {k} {before.value} -> Serial"


def _skip_counts(tile, warpgroups: int, row_tile=lambda bx: bx) -> dict:
    """Trip counts of a causal tile's loop over key tiles (functions of the block indices, and of the
    row-tile loop's index in a persistent grid: `row_tile(bx)`), by what they compute: the recipe's
    (row tile t's last row t 64 w + 64 w - 1 keeps keys up to it + N - M), and counts a user could
    get wrong: too short (rejected by ONLINE-SKIP) or too long (exact)."""
    block, n, shift, t = 64 * warpgroups, tile.key_tile, tile.keys - tile.rows, row_tile
    return {
        "the recipe's": lambda bx, by, bz: (t(bx) * block + block - 1 + shift) // n + 1,
        "one tile short": lambda bx, by, bz: (t(bx) * block + block - 1 + shift) // n,
        "one tile more": lambda bx, by, bz: (t(bx) * block + block - 1 + shift) // n + 2,
        "one warpgroup's rows": lambda bx, by, bz: (t(bx) * 64 + 63 + shift) // n + 1,
        "top-left aligned (no N - M)": lambda bx, by, bz: (t(bx) * block + block - 1) // n + 1,
        "the block's first row": lambda bx, by, bz: (t(bx) * block + shift) // n + 1,
        "every tile": lambda bx, by, bz: -(-tile.keys // n),
        "one tile": lambda bx, by, bz: 1,
        "none": lambda bx, by, bz: 0,
    }


def _unmasked_counts(tile, warpgroups: int, row_tile=lambda bx: bx) -> dict:
    """Unmasked counts (the first iterations computed without the mask) of a causal tile's loop: the
    recipe's (row tile t's first row t 64 w keeps keys up to it + N - M), none, and counts a user
    could get wrong: one tile past the diagonal (rejected by ONLINE-SKIP), one fewer (exact; below 0
    for a block: rejected, the kernel's count is unsigned), every tile (rejected)."""
    block, n, shift, t = 64 * warpgroups, tile.key_tile, tile.keys - tile.rows, row_tile
    return {
        "no": None,
        "the recipe's unmasked": lambda bx, by, bz: (t(bx) * block + shift + 1) // n,
        "one tile past the diagonal unmasked": lambda bx, by, bz: (t(bx) * block + shift + 1) // n + 1,
        "one tile fewer unmasked": lambda bx, by, bz: (t(bx) * block + shift + 1) // n - 1,
        "the last row's unmasked": lambda bx, by, bz: (t(bx) * block + block + shift) // n,
        "zero unmasked": lambda bx, by, bz: 0,
        "every tile unmasked": lambda bx, by, bz: -(-tile.keys // n),
    }


def _row_tile(r: Roles, online):
    """The row tile a block computes, from blockIdx.x; in a causal persistent grid (each head's row
    tiles on persistent / heads blocks, a serial loop over them at the max's loop axis 2) tile
    s X + bx for that loop's index s (TensorView.loop_index)."""
    persistent = r.options.get("persistent")
    if not persistent:
        return lambda bx: bx
    per_head, s = persistent // (r.tile.batch * r.tile.group), online.loop_index(2)
    return lambda bx: s * per_head + bx


def _skip_count(rng, r: Roles):
    """A causal tile's masked key tiles skipped through the public API (TensorView.skip_masked) with
    a trip count drawn from _skip_counts, where the recipe computes every tile (skip_masked_tiles=False);
    where it skips them already, a second call, which the API refuses."""
    online = [t for t in r.computed if getattr(t, "online", None) is not None]
    keeps = [t for t in r.computed if t.dtype.is_bool]
    if not online or not keeps or not getattr(r.tile, "causal", False):
        return None
    warpgroups, row_tile = r.options.get("warpgroups", 1), _row_tile(r, online[0])
    name, count = rng.choice(sorted(_skip_counts(r.tile, warpgroups, row_tile).items()))
    kept, unmasked = rng.choice(sorted(_unmasked_counts(r.tile, warpgroups, row_tile).items()))
    online[0].skip_masked(keeps[0], count, unmasked=unmasked)
    return f"{online[0].name}.skip_masked({keeps[0].name}, {name} count, {kept} count)"


MUTATIONS: dict[str, Callable] = {
    "thread_digits": _thread_digits, "quads_merged": _quads_merged, "loop_order": _loop_order,
    "registers_permuted": _registers_permuted, "inline_position": _inline_position, "macro": _macro,
    "operand_memory": _operand_memory, "box_axis_serial": _box_axis_serial, "vectorized": _vectorized,
    "unrolled": _unrolled, "parallel_swap": _parallel_swap, "unbound": _unbound, "bound": _bound,
    "skip_count": _skip_count,
}
SKIP_COUNT_RATE = 0.6  # causal cases computing every tile that first skip with a drawn count (else rare)


# -- the draw -------------------------------------------------------------------------------------------


def _out_of_range(rng, case_steps, api_bugs, recipe: Recipe, params: dict) -> None:
    """One parameter drawn outside its range: the recipe must raise tp.ScheduleError."""
    p = rng.choice(recipe.parameters + recipe.options)
    bad = {**params, p.name: p.invalid(rng, params)}
    if bad[p.name] is NONE:
        return
    shown = f"{p.name}={bad[p.name]!r}"
    try:
        recipe.make(bad)
    except tp.ScheduleError:
        case_steps.append(f"{shown} refused (ScheduleError)")
        return
    except Exception as e:  # noqa: BLE001 - the finding
        api_bugs.append(f"{recipe.tile.__name__}({shown}) raised {type(e).__name__}: {e}"[:400])
        return
    api_bugs.append(f"{recipe.tile.__name__}({shown}) was built: the recipe did not raise tp.ScheduleError")


def _mutate(rng, case: AttentionCase, names=None) -> None:
    names = list(MUTATIONS) if names is None else names
    rng.shuffle(names)
    for name in names:  # the first mutation that finds a target in this schedule
        try:
            done = MUTATIONS[name](rng, roles(case.fusion, case.tile, case.options))
        except tp.ScheduleError as e:
            case.mutations.append(name)
            case.steps.append(f"{name}: refused ({str(e)[:160]})")
            return
        except Exception as e:  # noqa: BLE001 - the finding
            case.mutations.append(name)
            case.api_bugs.append(f"{name} raised {type(e).__name__}: {e}"[:400])
            return
        if done is not None:
            case.mutations.append(name)
            case.steps.append(f"{name}: {done}")
            return


def attention_case(seed: int, recipe_name: str | None = None) -> AttentionCase:
    rng = random.Random(seed)
    name = recipe_name or rng.choice(sorted(RECIPES))
    recipe = RECIPES[name]
    params = _draw_params(rng, recipe)
    steps: list[str] = []
    api_bugs: list[str] = []
    if rng.random() < OUT_OF_RANGE_RATE:
        _out_of_range(rng, steps, api_bugs, recipe, params)
    tile, fusion = recipe.make(params)
    options = {p.name: params[p.name] for p in recipe.options}
    case = AttentionCase(fusion, tile, name, steps=[recipe.shown(tile, params)] + steps, api_bugs=api_bugs,
                         options=options)
    if getattr(tile, "masked", False):  # causal only where every row keeps a key
        case.mask = rng.choice([m for m in MASKS if m != "causal" or tile.rows <= tile.keys])
        case.steps.insert(1, f"mask {case.mask}")
    if tile.causal and not options["skip_masked_tiles"] and "skip_count" in MUTATIONS \
            and rng.random() < SKIP_COUNT_RATE:
        _mutate(rng, case, ["skip_count"])
    if rng.random() < MUTATION_RATE:
        for _ in range(1 if rng.random() < 0.75 else 2):
            _mutate(rng, case)
    return case


__all__ = ["MUTATIONS", "NONE", "RECIPES", "AttentionCase", "Parameter", "Recipe", "attention_case", "roles"]
