"""A compiled kernel's resources from ptxas (codegen/runtime/ptxas.py), no GPU needed: the verbose
log parsed, Kernel.resources, the disk cache keeping them beside the cubin, and the
PerformanceWarning a spilling kernel gets when it is compiled (the attention recipe at head dim 256
with a key tile of 192 spills; at 64 with 128 it does not), and attention at sequence tails, whose
hole predicates once spilled (992 bytes at 300 rows), compiled without spills; a kernel whose
wgmma.mma_async ptxas serialized (a persistent attention grid whose blocks do not divide its tiles)
is told so."""

from __future__ import annotations

import warnings

import pytest

import tileproof as tp
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.ptxas import MAX_REGISTERS, Resources, parse_resources, serialized_note, spill_note
from tileproof.recipes.attention import AttentionTile, attention

pytestmark = pytest.mark.usefixtures("private_cache")

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'tp_attention' for 'sm_90a'
ptxas info    : Function properties for tp_attention
ptxas         .     976 bytes stack frame, 796 bytes spill stores, 1032 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 976 bytes cumulative stack size
ptxas info    : Compile time = 2714.120 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
"""

SOURCE = """extern "C" __global__ void k(float* out, int n) {
  float a[512];
  for (int i = 0; i < 512; i++) a[i] = out[i * n + threadIdx.x];
  float s = 0;
  for (int i = 0; i < 512; i++) s += a[(i * 7 + n) % 512] * a[i];
  out[threadIdx.x] = s;
}
"""


def test_the_verbose_log_gives_each_entry_function_its_resources():
    assert parse_resources(LOG) == {"tp_attention": Resources(255, 796, 1032, 976)}  # not the device function
    assert parse_resources("") == {}


SERIALIZED = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
              "to non wgmma instructions defining accumulator registers of a wgmma between start and end of the "
              "pipeline stage in the function 'tp_attention' in line 2828\n")


def test_the_log_names_the_kernels_whose_wgmma_ptxas_serialized_and_why():
    r = parse_resources(SERIALIZED + LOG)["tp_attention"]
    assert r == Resources(255, 796, 1032, 976, "C7515: non wgmma instructions defining accumulator registers of a "
                                                "wgmma between start and end of the pipeline stage")
    assert r.wgmma_serialized and "serialized its wgmma.mma_async (C7515: non wgmma" in serialized_note("k", r)
    assert serialized_note("k", Resources(255, 0, 0, 0)) is None
    assert Resources.from_json(r.to_json()) == r
    with pytest.raises(KeyError):  # a cache entry from before the field: compiled again
        Resources.from_json({k: v for k, v in r.to_json().items() if k != "wgmma_serialized"})


def test_a_persistent_grid_whose_blocks_do_not_divide_its_tiles_is_told_its_wgmma_are_serialized():
    """8 x 32 heads of 22 row tiles of 192 rows (5632): 131 blocks leave the last step a tile guard
    around the wgmma, which ptxas serializes (an H200 ran it at 357 TFLOP/s, 128 blocks at 460)."""
    tile = AttentionTile(rows=4096, keys=4096, head_dim=64, value_dim=64, key_tile=128, batch=256)
    options = dict(warpgroups=3, stages=2, producer=True, registers=(24, 160), in_place=True, overlap=True,
                   q_stages=2)
    kernel, warned = compiled_with_warnings(attention(tile, persistent=131, **options))
    assert kernel.resources.wgmma_serialized.startswith("C7515")
    assert [w for w in warned if "ptxas serialized its wgmma.mma_async (C7515" in str(w.message)]
    kernel, warned = compiled_with_warnings(attention(tile, persistent=128, **options))
    assert not kernel.resources.wgmma_serialized and not [w for w in warned if "serialized" in str(w.message)]


def test_a_kernel_without_spills_gets_no_note_and_one_at_the_limit_no_advice_of_more_registers():
    assert spill_note("k", Resources(138, 0, 0, 0)) is None
    at_limit = spill_note("k", Resources(MAX_REGISTERS, 796, 1032, 976))
    assert "796 bytes of spill stores" in at_limit and "1032 bytes of spill loads" in at_limit
    assert "255 registers per thread (the most a thread may have)" in at_limit and "num_registers" not in at_limit
    below = spill_note("k", Resources(128, 8, 8, 16))
    assert "128 registers per thread;" in below and "num_registers" in below


def test_a_warp_specialized_kernel_is_told_its_consumers_count_not_the_launch_s():
    note = spill_note("k", Resources(168, 2436, 3260, 1288), setmaxnreg=(24, 240))
    assert "with 168 registers per thread at launch, 240 in the consumers after setmaxnreg (24 in the producer)" in note
    assert "give the consumers more" in note
    assert "give the consumers more" not in spill_note("k", Resources(168, 8, 8, 8), setmaxnreg=(24, 248))


def test_the_disk_cache_keeps_the_resources_and_a_cubin_without_them_is_compiled_again(monkeypatch):
    cubin, resources = nvrtc.compile_kernel(SOURCE, "sm_90a")
    assert cubin[:4] == b"\x7fELF"
    local = resources["k"]  # a dynamically indexed array: ptxas keeps it in the stack frame
    assert local.registers > 0 and local.stack_frame_bytes == 512 * 4 and not local.spills

    with monkeypatch.context() as m:
        m.setattr(nvrtc, "_compile", lambda *a: pytest.fail("compiled again, not read from the cache"))
        assert nvrtc.compile_kernel(SOURCE, "sm_90a") == (cubin, resources)

    key = nvrtc.cache_key(SOURCE, nvrtc.options("sm_90a", None))
    (nvrtc.cache_dir() / f"{key}.resources.json").unlink()
    assert nvrtc.compile_kernel(SOURCE, "sm_90a") == (cubin, resources)
    assert (nvrtc.cache_dir() / f"{key}.resources.json").is_file()


def compiled_with_warnings(fusion):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = tp.compile(fusion)
    return kernel, [w for w in caught if issubclass(w.category, tp.PerformanceWarning)]


def test_a_kernel_that_spills_says_so_when_it_is_compiled():
    tile = AttentionTile(rows=4096, keys=3840, head_dim=256, value_dim=256, key_tile=192)
    kernel, warned = compiled_with_warnings(attention(tile, in_place=True))
    r = kernel.resources
    assert r.registers == MAX_REGISTERS and r.spill_store_bytes > 0 and r.spill_load_bytes > 0 and r.spills
    assert len(warned) == 1
    message = str(warned[0].message)
    assert message.startswith(f"{kernel.name}: ptxas spilled registers to local memory")
    assert f"{r.spill_store_bytes} bytes of spill stores" in message and "smaller register tiles" in message

    again, warned = compiled_with_warnings(attention(tile, in_place=True))
    assert again is kernel and not warned  # once: a repeated compile is answered from memory


def test_a_warp_specialized_kernel_that_spills_names_its_consumers_count():
    tile = AttentionTile(rows=4096, keys=3200, head_dim=64, value_dim=256, key_tile=160)
    fusion = attention(tile, stages=2, producer=True, registers=(56, 224), warpgroups=2, in_place=True)
    kernel, warned = compiled_with_warnings(fusion)
    assert kernel.resources.spills and len(warned) == 1
    assert (f"with {kernel.resources.registers} registers per thread at launch, 224 in the consumers after "
            f"setmaxnreg (56 in the producer)") in str(warned[0].message)


def test_a_kernel_that_does_not_spill_compiles_without_a_warning():
    tile = AttentionTile(rows=4096, keys=4096, head_dim=64, value_dim=64, key_tile=128)
    kernel, warned = compiled_with_warnings(attention(tile, in_place=True))
    assert 0 < kernel.resources.registers < MAX_REGISTERS and not kernel.resources.spills
    assert not warned


WS = dict(warpgroups=2, stages=2, producer=True, registers=(24, 240), in_place=True)


@pytest.mark.parametrize("tile, options", [
    (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=4), WS),
    (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=4, causal=True), WS),
    (AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, batch=4, causal=True),
     {**WS, "stages": 3}),
    (AttentionTile(rows=300, keys=300, key_tile=64, head_dim=64, value_dim=64, batch=4, causal=True), WS),
], ids=["tails", "causal_tails", "causal_tails_3_stages", "causal_key_tile_64"])
def test_attention_at_sequence_tails_does_not_spill(tile, options):
    """300 rows and keys, not a multiple of the tiles: S - max, exp2, the casts and the causal mask's
    iotas and comparison run at their holes (execution/clipped_holes.py unread_holes); with a row
    and a key predicate on each of their elements they spilled 992, 1904, 1884 and 492 bytes."""
    kernel, warned = compiled_with_warnings(attention(tile, **options))
    assert not kernel.resources.spills and not warned
