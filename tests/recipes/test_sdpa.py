"""recipes/sdpa.py without a GPU: the configuration each shape class gets verifies and compiles
(NVRTC), a forced configuration the verifier rejects is never compiled and the entry says why,
bad shapes, dtypes, devices, strides and arguments get InputErrors naming them, SDPA's top-left
causal mask is refused where it differs from the kernel's, and the kernel cache is bounded."""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from collections import OrderedDict

import pytest

import tileproof as tp
from tileproof.recipes import Attention, AttentionConfig, sdpa
from tileproof.recipes.sdpa import (CONFIGS, Problem, candidates, grid_efficiency, per_head_blocks,
                                  persistent_blocks)

pytestmark = pytest.mark.usefixtures("private_cache")
module = importlib.import_module("tileproof.recipes.sdpa")


def shapes(b, hq, hkv, m, n, d, dv=None):
    return (b, hq, m, d), (b, hkv, n, d), (b, hkv, n, dv or d)


@pytest.mark.parametrize("call,causal,chosen", [
    (shapes(4, 32, 32, 4096, 4096, 128), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # O by TMA store
    (shapes(8, 32, 32, 4096, 4096, 64), False, "kt128_wg3_ws2_r160_ip_ov_pst_q2"),  # 3 warpgroups, Q from the producer
    (shapes(1, 4, 4, 1024, 1024, 64), False, "kt128_wg3_ws2_r160_ip_ov_pst_q2"),  # 24 row tiles: not persistent
    (shapes(1, 16, 16, 16384, 16384, 64), False, "kt128_wg3_ws2_r160_ip_ov"),  # past 4096 keys: one block a tile
    (shapes(4, 32, 32, 4096, 4096, 128), True, "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma"),  # 16 blocks a head, Q ahead
    (shapes(8, 32, 32, 4096, 4096, 64), True, "kt128_wg3_ws2_r160_ip_ph11_q2"),  # head dim 64: 3 warpgroups
    (shapes(1, 4, 2, 300, 300, 64), True, "kt128_wg3_ws2_r160_ip_ph11_q2"),  # grouped heads, tails: 2 blocks a head
    (shapes(2, 2, 2, 100, 1000, 192, 64), False, "kt64_wg2_ws2_r240_ip_ov_pst"),  # D != Dv, M < N: 4 row tiles
    (shapes(1, 4, 4, 1024, 1024, 256), True, "kt64_wg2_ws2_r240_ip_ov"),
    (shapes(16, 32, 8, 256, 256, 128), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # 1024 row tiles: persistent
    (shapes(32, 16, 16, 256, 256, 64), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # short: O by TMA store
    (shapes(2, 4, 4, 300, 300, 64), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # a row tail: the TMA store clips
    (shapes(1, 1, 1, 2, 2, 64), False, "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma"),  # two queries, two keys: a key tile of 16
], ids=lambda x: "x".join(map(str, x[0])) if isinstance(x, tuple) else str(x))
def test_each_shape_class_runs_its_first_candidate_verified_and_compiled(call, causal, chosen):
    entry = Attention(is_causal=causal)
    config, kernel = entry.kernel(entry.problem(*call))
    assert config.name == chosen == candidates(call[0][2], call[1][2], call[0][3], call[2][3], causal)[0].name
    assert kernel.report.ok and "wgmma.mma_async" in kernel.cuda_source
    assert entry.kernel(entry.problem(*call))[1] is kernel  # cached
    tile = entry.problem(*call).tile(config, causal, None)
    persistent = config.keywords(tile)["persistent"]
    empties = kernel.cuda_source.count("unsigned long long tp_empty_T")  # a producer loop's empty mbarriers
    # the loop's, Q's (loaded by the producer over the row tiles), K's (read ahead by the overlap: its own,
    # where the loop has a next key tile to read ahead)
    ahead = config.overlap and tile.keys > tile.tile_keys
    assert empties == int(config.producer) + (config.q_stages > 1 and persistent is not None) + int(ahead)


def test_grid_efficiency_is_the_work_over_the_sms_time_under_list_scheduling():
    assert grid_efficiency([2, 2], 2, 4) == 1.0  # four equal blocks, four SMs
    assert grid_efficiency([3, 1], 1, 2) == pytest.approx(4 / 6)  # one SM idle for 2 of 3
    assert grid_efficiency([1], 5, 4) == pytest.approx(5 / 8)  # a second wave of one block
    assert grid_efficiency([1, 3], 2, 2) == pytest.approx(8 / 10)  # 1, 3 | 1 on the first free, then 3: 5 and 3


@pytest.mark.parametrize("call,config,blocks", [
    # 16 heads of 86 row tiles: 11 blocks a head are 176 blocks on 132 SMs (H200: 298.8 TFLOP/s, one a tile 435.5)
    ((1, 16, 16, 16384, 64), "kt128_wg3_ws2_r160_ip_ph11_q2", 86),
    ((2, 16, 16, 16384, 128), "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma", 128),  # 512 blocks: 524.2, one a tile 556.8
    ((8, 32, 32, 4096, 64), "kt128_wg3_ws2_r160_ip_ph11_q2", 11),  # 2816 blocks: the model's gain under the margin
    ((4, 32, 32, 4096, 128), "kt128_wg2_ws2_r240_ip_ov_ph16_q2_tma", 16),  # 527.8 against one a tile's 521.4
    ((1, 4, 2, 300, 64), "kt128_wg3_ws2_r160_ip_ph11_q2", 2),  # fewer row tiles than blocks a head: one each
], ids=str)
def test_a_causal_per_head_grid_takes_one_block_a_row_tile_where_its_blocks_fill_the_sms_badly(call, config, blocks):
    b, hq, hkv, s, d = call
    c = CONFIGS[config]
    tile = Problem(b, hq, hkv, s, s, d, d).tile(c, True, None)
    assert per_head_blocks(tile, c.warpgroups, c.per_head) == blocks
    assert c.keywords(tile)["persistent"] == b * hq * blocks
    exact = dataclasses.replace(c, per_head_exact=True)  # as given (benchmarks/attention_per_head.py)
    assert exact.keywords(tile)["persistent"] == b * hq * min(c.per_head, -(-s // (64 * c.warpgroups)))
    # on a GPU of as many SMs as the configured grid's blocks, that grid is one full wave
    assert per_head_blocks(tile, c.warpgroups, c.per_head, sms=b * hq * min(c.per_head, blocks)) == min(c.per_head, blocks)


@pytest.mark.parametrize("call,config,blocks", [
    ((4, 32, 32, 4096, 128), "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma", 128),  # 4096 row tiles: 32 steps of 128 blocks
    ((8, 32, 32, 4096, 64), "kt128_wg3_ws2_r160_ip_ov_pst_q2", 128),  # 5632 of 192 rows: 44 steps (43 divide not)
    ((1, 40, 40, 600, 64), "kt128_wg3_ws2_r160_ip_ov_pst_q2", 80),  # 160 row tiles: 2 steps of 80 blocks
    ((1, 16, 16, 16384, 64), "kt128_wg3_ws2_r160_ip_ov_pst_q2", None),  # 1376: neither 11 nor 12 divide it
    ((1, 4, 4, 4096, 128), "kt128_wg2_ws2_r240_ip_ov_pst_q2_tma", None),  # 128 row tiles: one block each
], ids=str)
def test_a_persistent_grid_takes_a_block_count_that_divides_its_tiles(call, config, blocks):
    b, hq, hkv, s, d = call
    tile = Problem(b, hq, hkv, s, s, d, d).tile(CONFIGS[config], False, None)
    assert CONFIGS[config].keywords(tile)["persistent"] == blocks
    assert persistent_blocks(288, 132) == 96 and persistent_blocks(201, 132) is None  # 3 steps; 2 do not divide 201
    assert persistent_blocks(4096, 114) is None  # an H100 PCIe's 114 SMs: neither 36 nor 37 steps divide 4096


def test_a_candidate_whose_wgmma_ptxas_serializes_gives_way_to_the_next(monkeypatch):
    """1 x 16 x 16384 at head dim 64 on a persistent grid of 128 blocks over 1376 row tiles (the
    count before persistent_blocks): ptxas serializes its wgmma (C7515; an H200 ran it at 333 TFLOP/s
    against 463 one block a tile), and the entry runs the next candidate."""
    call = shapes(1, 16, 16, 16384, 16384, 64)
    guarded = dataclasses.replace(CONFIGS["kt128_wg3_ws2_r160_ip_ov_pst_q2"], name="guarded")
    monkeypatch.setattr(module, "persistent_blocks", lambda tiles, sms: 128)
    monkeypatch.setattr(module, "candidates", lambda *a: (guarded, CONFIGS["kt128_wg3_ws2_r160_ip_ov"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config, kernel = Attention().kernel(Attention().problem(*call))
    assert config.name == "kt128_wg3_ws2_r160_ip_ov" and not kernel.resources.wgmma_serialized
    monkeypatch.setattr(module, "candidates", lambda *a: (guarded,))
    monkeypatch.setattr(tp.codegen.compile, "_memory", type(tp.codegen.compile._memory)())  # built again: it warns
    with pytest.warns(tp.PerformanceWarning, match=r"serialized its wgmma.mma_async \(C7515"):
        config, kernel = Attention().kernel(Attention().problem(*call))
    assert config is guarded and kernel.resources.wgmma_serialized  # none other: it runs, with its warning


def test_a_forced_configuration_the_verifier_rejects_is_named_with_its_rule():
    """256-key tiles at head dim 128 in two stages need more shared memory than a block has: never
    compiled, and the entry's error names the configuration and the rule."""
    too_big = AttentionConfig("kt256_s2", 256, stages=2, in_place=True, warpgroups=2, producer=True,
                              registers=(24, 240))
    entry = Attention(config=too_big)
    with pytest.raises(tp.InputError, match=r"kt256_s2: SMEM-CAPACITY"):
        entry.kernel(entry.problem(*shapes(1, 1, 1, 512, 512, 128)))
    assert not entry._kernels


def test_a_rejected_candidate_gives_way_to_the_next(monkeypatch):
    """The first candidate rejected at the shape (here 256-key tiles at head dim 128): the next runs."""
    too_big = AttentionConfig("kt256_s2", 256, stages=2, in_place=True, warpgroups=2, producer=True,
                              registers=(24, 240))
    monkeypatch.setattr(module, "candidates", lambda *a: (too_big, CONFIGS["kt64"]))
    entry = Attention()
    config, _ = entry.kernel(entry.problem(*shapes(1, 1, 1, 512, 512, 128)))
    assert config.name == "kt64"


def test_a_candidate_that_spills_gives_way_to_the_next_without_a_warning(monkeypatch):
    """Causal head dim 256 at 300 queries and keys: ptxas spills 4 bytes of the first candidate's
    registers (the overlap's), within SPILL_TOLERANCE: it runs, without a warning. With the
    tolerance below that (no shape tried spills more since the reductions run at their rows'
    holes; 72 bytes here before), the entry runs the next, which spills none, and says nothing;
    the same configuration forced on it runs as it compiles, its PerformanceWarning passed on."""
    call = shapes(1, 2, 2, 300, 300, 256)
    first = candidates(300, 300, 256, 256, True)[0]
    monkeypatch.setattr(tp.codegen.compile, "_memory", type(tp.codegen.compile._memory)())
    with pytest.warns(tp.PerformanceWarning, match="spilled registers"):  # built here: its compile warns
        config, _ = Attention(is_causal=True, config=first).kernel(Attention(is_causal=True).problem(*call))
    assert config is first
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config, kernel = Attention(is_causal=True).kernel(Attention(is_causal=True).problem(*call))
    assert config is first and 0 < kernel.resources.spill_store_bytes <= module.SPILL_TOLERANCE
    monkeypatch.setattr(module, "SPILL_TOLERANCE", kernel.resources.spill_store_bytes - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config, kernel = Attention(is_causal=True).kernel(Attention(is_causal=True).problem(*call))
    assert config.name == "kt64_wg2_ws2_r240_ip" and not kernel.resources.spills


def test_when_every_candidate_spills_the_first_runs_with_its_warning(monkeypatch):
    spills = candidates(300, 300, 256, 256, True)[0]  # 4 bytes: above a tolerance of none
    monkeypatch.setattr(module, "candidates", lambda *a: (spills, spills))
    monkeypatch.setattr(module, "SPILL_TOLERANCE", 0)
    monkeypatch.setattr(tp.codegen.compile, "_memory", type(tp.codegen.compile._memory)())  # built again: it warns
    with pytest.warns(tp.PerformanceWarning, match="spilled registers"):
        config, kernel = Attention(is_causal=True).kernel(Attention(is_causal=True).problem(*shapes(1, 2, 2, 300, 300,
                                                                                                       256)))
    assert config is spills and kernel.resources.spills


@pytest.mark.parametrize("call,message", [
    (((1, 2, 64, 64), (1, 2, 64, 64), (1, 2, 64)), r"v must have 4 dimensions"),
    (((2, 2, 64, 64), (1, 2, 64, 64), (1, 2, 64, 64)), r"same batch B, got 2, 1 and 1"),
    (((1, 2, 64, 64), (1, 2, 64, 64), (1, 2, 80, 64)), r"same heads and keys"),
    (((1, 2, 64, 64), (1, 2, 64, 128), (1, 2, 64, 64)), r"same head dim D, got 64 and 128"),
    (((1, 3, 64, 64), (1, 2, 64, 64), (1, 2, 64, 64)), r"Hq = 3 must be a multiple of .* Hkv = 2"),
    (((1, 2, 64, 96), (1, 2, 64, 96), (1, 2, 64, 64)), r"q's head dim D must be one of 64, 128, 192, 256 .* got 96"),
    (((1, 2, 64, 64), (1, 2, 64, 64), (1, 2, 64, 32)), r"v's head dim Dv must be one of .* got 32"),
    (((1, 2, 1, 64), (1, 2, 64, 64), (1, 2, 64, 64)), r"queries M = 1"),
    (((1, 2, 64, 64), (1, 2, 1, 64), (1, 2, 1, 64)), r"keys N = 1"),
    (((70000, 1, 8, 64), (70000, 1, 8, 64), (70000, 1, 8, 64)), r"B x Hkv = 70000 .* at most 65535"),
])
def test_bad_shapes_get_input_errors_naming_them(call, message):
    with pytest.raises(tp.InputError, match=message):
        Problem.of(*call)


def test_a_top_left_causal_mask_needs_as_many_queries_as_keys():
    """SDPA's is_causal keeps j <= i; the kernel's mask j <= i + N - M: equal only where M == N."""
    with pytest.raises(tp.InputError, match=r"M = 100 queries and N = 300 keys: SDPA's mask .*\(top left\)"):
        Attention(is_causal=True).problem(*shapes(1, 1, 1, 100, 300, 64))
    assert Attention(is_causal=True, causal_alignment="bottom_right").problem(*shapes(1, 1, 1, 100, 300, 64)).keys == 300
    with pytest.raises(tp.InputError, match=r"M = 300 queries > N = 100 keys"):
        Attention(is_causal=True, causal_alignment="bottom_right").problem(*shapes(1, 1, 1, 300, 100, 64))
    assert Attention(is_causal=False).problem(*shapes(1, 1, 1, 100, 300, 64)).rows == 100  # no mask, any M


@pytest.mark.parametrize("kwargs,message", [
    (dict(is_causal=1), r"is_causal must be True or False"),
    (dict(scale=0.0), r"scale must be a positive finite number"),
    (dict(scale=float("nan")), r"scale must be a positive finite number"),
    (dict(lse="yes"), r"lse must be True or False"),
    (dict(causal_alignment="top"), r"causal_alignment must be one of top_left, bottom_right"),
    (dict(config="kt999"), r"no configuration named 'kt999'"),
    (dict(cache_size=0), r"cache_size must be a positive int"),
])
def test_bad_arguments_get_input_errors(kwargs, message):
    with pytest.raises(tp.InputError, match=message):
        Attention(**kwargs)


def test_sdpa_names_an_unhashable_argument():
    with pytest.raises(tp.InputError, match=r"scale must be a positive finite number"):
        sdpa(None, None, None, scale=[0.5])


class FakeTensor:
    """What the entry's checks read of a torch.Tensor (no PyTorch needed)."""

    def __init__(self, shape, dtype="torch.bfloat16", device="cuda:0", contiguous=True, address=1 << 20):
        self.shape, self.dtype, self._contiguous, self._address = tuple(shape), dtype, contiguous, address
        self.device = _Device(device.partition(":")[0], device)

    def is_contiguous(self):
        return self._contiguous

    def data_ptr(self):
        return self._address

    def stride(self):
        return [1] * len(self.shape)


class _Device:
    def __init__(self, kind, name):
        self.type, self.name = kind, name

    def __eq__(self, other):
        return isinstance(other, _Device) and other.name == self.name

    def __str__(self):
        return self.name


@pytest.mark.parametrize("change,message", [
    (dict(dtype="torch.float16"), r"k must be bfloat16, got float16"),
    (dict(device="cpu"), r"k must be on a CUDA device, got cpu"),
    (dict(device="cuda:1"), r"q, k and v must be on one device, got k on cuda:1 and q on cuda:0"),
    (dict(address=(1 << 20) + 8), r"k's address must be a multiple of 16 bytes"),
])
def test_bad_tensors_get_input_errors_naming_them(change, message):
    q, v = FakeTensor((1, 2, 64, 64)), FakeTensor((1, 2, 64, 64))
    with pytest.raises(tp.InputError, match=message):
        Attention()._checked(q, FakeTensor((1, 2, 64, 64), **change), v)
    with pytest.raises(tp.InputError, match=r"k must be a torch.Tensor, got list"):
        Attention()._checked(q, [[1.0]], v)
    assert Attention()._checked(q, FakeTensor((1, 2, 80, 64)), FakeTensor((1, 2, 80, 64))).keys == 80
    # a fake tensor (torch.compile's tracing) has no address to check
    assert Attention()._checked(q, FakeTensor((1, 2, 64, 64), address=8), v, address=False).keys == 64
    # a strided tensor (a transposed [B, S, H, D] view) passes: the call runs on a row-major copy
    assert Attention()._checked(q, FakeTensor((1, 2, 64, 64), contiguous=False), v).keys == 64
    assert module._strided(q, FakeTensor((1, 2, 64, 64), contiguous=False), v) and not module._strided(q, q, v)


def test_the_kernel_cache_and_the_entries_are_bounded(monkeypatch):
    entry = Attention(cache_size=2)
    made = []
    compiled = type("Compiled", (), {"resources": None})  # a kernel ptxas gave no resources of (none spilled)
    monkeypatch.setattr(module.tp, "compile", lambda fusion, target: made.append(fusion) or compiled())
    for m in (64, 128, 64, 256):
        entry.kernel(entry.problem(*shapes(1, 1, 1, m, m, 64)))
    assert len(made) == 3 and len(entry._kernels) == 2  # 64 reused, then dropped for 256 (least recent: 128)
    assert [p.rows for p, _ in entry._kernels] == [64, 256]
    monkeypatch.setattr(module, "_entries", OrderedDict())
    monkeypatch.setattr(Attention, "__call__", lambda self, q, k, v: self)  # the entry, not a launch
    kept = sdpa(None, None, None, scale=0.5)
    for k in range(3 * module.ENTRY_CACHE_SIZE):
        sdpa(None, None, None, scale=1.0 + k)
        assert sdpa(None, None, None, scale=0.5) is kept
    assert len(module._entries) == module.ENTRY_CACHE_SIZE


try:
    import torch
except ImportError:
    torch = None


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_the_entry_is_an_operator_torch_compile_traces():
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = tp.as_torch_op(Attention(is_causal=True, lse=True), name="tileproof_test::sdpa_causal_lse")
    with FakeTensorMode():
        q, k, v = (torch.empty(2, 4, 256, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        out, lse = op(q, k, v)
    assert tuple(out.shape) == (2, 4, 256, 64) and out.dtype == torch.bfloat16
    assert tuple(lse.shape) == (2, 4, 256) and lse.dtype == torch.float32
