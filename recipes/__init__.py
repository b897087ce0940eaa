"""Recipes: schedule builders for whole kernels, written on the public `tileproof` API only (as a
user would write them; they import `tileproof` and each other, nothing of its packages).

Each recipe is a function of the problem sizes and one frozen parameter dataclass, modelled on
nvFuser's MatmulParams (csrc/scheduler/matmul_heuristic.h): related knobs grouped (the tile, the
pipeline, the grid order, the cluster, the epilogue, the operands), every field checked at
construction (tp.ScheduleError naming the class and the field), the repr naming only what differs
from the defaults. What a recipe builds is an ordinary tp.Fusion: verify it, compile it, or
change it further.

    hopper_gemm(m, n, k, HopperGemmParams(...))   Hopper wgmma GEMM, TMA loads (hopper_gemm.py,
                                                  its parameters in hopper_params.py)
    mma_gemm(m, n, k, MmaGemmParams(...))         mma.sync GEMM, cp.async stages and ldmatrix
                                                  fragments (mma_gemm.py)

    HopperGemmTuning(m, n, k, ...)                hopper_gemm as an autotuning recipe: build(**config),
    matmul_tuning(a, b)                           a default space, inputs (gemm_tuning.py; tp.autotune)

    matmul(a, b, out_dtype=..., bias=, residual=, D = A @ B on 2-D PyTorch operands of either major,
           scale=, activation=)               with a fused epilogue (EpilogueOps),
    Matmul(out_dtype=...)                         a configuration chosen per shape, its kernels per
                                                  shape class (matmul.py); Matmul is also a recipe
                                                  entry for tp.as_torch_op
    choose(m, n, k, ...)                          that choice: tile, stages, cluster, persistence,
                                                  group, split-K (matmul_heuristic.py)
    split_k_partials(SplitKParams(...))           split-K as two kernels: float32 partials of K's
    split_k_sum(out_dtype, ops=EpilogueOps(...))  slices, then their sum, ops fused (split_k.py)

    softmax(x), log_softmax(x)                    row softmax, LayerNorm, RMSNorm and cross-entropy
    layer_norm(x, w, b), rms_norm(x, w)           (forward) on PyTorch tensors: nvFuser's inner
    cross_entropy(logits, target_probs)           persistent schedule at a symbolic row length, a
    Softmax(), LayerNorm(), RMSNorm(), ...        kernel per row class (normalization.py; entries
                                                  for tp.as_torch_op)
    sdpa(q, k, v, is_causal=...), Attention(...)  attention on PyTorch tensors in SDPA's layout
                                                  [B, H, S, D]: a configuration of attention.py
                                                  chosen per shape, verified, compiled per shape
                                                  (sdpa.py; Attention is an entry for
                                                  tp.as_torch_op)

gemm_blocks.py holds the pieces both use (tiling by the block tile, grouped block orders, the
stmatrix epilogue's TMA store boxes); params.py the parameter groups both use (GridOrder,
Epilogue) and the checks. examples/valid/wgmma.py and examples/valid/mma.py show them in use.
"""

from .gemm_blocks import tile_multiples
from .gemm_tuning import HopperGemmTuning, matmul_tuning
from .hopper_gemm import hopper_gemm
from .matmul import Matmul, matmul
from .matmul_heuristic import CONFIGS, MatmulConfig, choose
from .hopper_params import Cluster, HopperGemmParams, HopperTile, Operand, TmaPipeline, swizzled_box
from .mma_gemm import CpAsyncPipeline, MmaGemmParams, MmaTile, matmul_fusion, mma_gemm
from .params import Epilogue, EpilogueOps, GridOrder
from .split_k import SplitKParams, split_k_partials, split_k_sum
from .sdpa import Attention, AttentionConfig, sdpa
from .normalization import (CrossEntropy, LayerNorm, RMSNorm, RowClass, Softmax, cross_entropy, layer_norm,
                            log_softmax, rms_norm, row_class, softmax)

__all__ = ["Attention", "AttentionConfig", "CONFIGS", "Cluster", "CrossEntropy", "LayerNorm", "RMSNorm", "RowClass", "Softmax", "cross_entropy",
           "layer_norm", "log_softmax", "rms_norm", "row_class", "softmax", "CpAsyncPipeline", "Epilogue", "EpilogueOps", "GridOrder", "HopperGemmParams", "HopperGemmTuning",
           "HopperTile", "Matmul", "MatmulConfig", "MmaGemmParams", "MmaTile", "Operand", "SplitKParams",
           "TmaPipeline", "choose", "hopper_gemm", "matmul", "matmul_fusion", "matmul_tuning", "mma_gemm",
           "sdpa", "split_k_partials", "split_k_sum", "swizzled_box", "tile_multiples"]
