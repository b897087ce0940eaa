"""Run a compiled kernel on random inputs and judge it against the float64 reference.

Shared by benchmarks/fuzz.py --run (accepted schedules must run correctly) and
benchmarks/rejected_on_gpu.py (rejected ones run anyway, to show the failure); an attention
kernel (fuzz.py's attention family) is judged by run_attention_and_judge against softmax(Q K^T
scale) V instead. Needs torch
and a GPU. Outputs are poisoned with NaN first, so an element the kernel never stores is
wrong unless the reference itself is NaN there; each output is followed by poisoned guard
elements, so a store past its end is seen ("wrote past an output").
"""

from __future__ import annotations

import itertools
import math

CANDIDATE_SIZES = (96, 128, 100, 256, 64, 1000, 1024, 2048, 33, 4096, 8192)  # tried in order per symbol
MAX_ELEMENTS = 1 << 24  # per tensor, when choosing symbolic sizes: keeps a case's arrays small
MAX_FIXED_ELEMENTS = 1 << 27  # per tensor of a fixed-size fusion (its sizes are not ours to choose)
TF32 = 2.0 ** -10  # a float32 MmaOp's operands rounded to tf32: |D - A B| <= 2^-10 |A| |B| (+ the float32 sums)
GUARD = 1 << 14  # poisoned elements after each output: a store past its end changes them
TORCH_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
                "int32": "int32", "int64": "int64", "int8": "int8"}


def _shape(t, sizes):
    from tileproof.model.expr import evaluate
    from tileproof.model.reduction import element_axes

    return [evaluate(t.logical[k].extent_expr, sizes) for k in element_axes(t)]  # a reduction drops its axes


def admitted_sizes(kernel) -> dict[str, int] | None:
    """Sizes for the fusion's symbols that the kernel's launch checks admit (assumptions,
    block and shared-memory limits) and that keep every tensor small; None if none of the
    candidates does."""
    import tileproof as tp

    symbols = list(kernel.fusion.symbols)
    tensors = list(kernel.fusion.inputs) + list(kernel.fusion.outputs)
    limit = MAX_ELEMENTS if symbols else MAX_FIXED_ELEMENTS
    for values in itertools.islice(itertools.product(CANDIDATE_SIZES, repeat=len(symbols)), 2000):
        sizes = dict(zip(symbols, values))
        if any(math.prod(_shape(t, sizes)) > limit for t in tensors):
            continue
        try:
            kernel.launch_params_for(**sizes)
        except tp.InputError:
            continue
        return sizes
    return None


def random_inputs(fusion, sizes, torch):
    """Random values in arrays laid out as each input's allocation domain says, a gap after
    every discontiguous axis (poisoned: a kernel that reads it stores NaN or -77)."""
    out = []
    for t in fusion.inputs:
        shape, dtype = _shape(t, sizes), getattr(torch, TORCH_DTYPES[t.dtype.name])
        if dtype.is_floating_point:  # |x| < ~50: exp stays clear of float32 overflow, where expf's
            values = (torch.randn(*shape, device="cuda") * 10).to(dtype)  # last ulp decides inf or not
        else:  # small integers: no overflow in the ops, so the reference's rounding is exact
            values = torch.randint(-50, 50, shape, device="cuda", dtype=dtype)
        out.append(_laid_out(t, values, torch))
    return out


def _laid_out(t, values, torch):
    from tileproof.model.global_layout import global_strides

    layout = global_strides(t)
    if layout is None:
        return values
    unit = max(16 // values.element_size(), 1)  # gaps keep every row 16-byte aligned
    strides, running = [1] * values.dim(), 1
    for axis, contiguous in zip(reversed(layout.alloc_axes), reversed(layout.contiguous)):
        if contiguous is False:
            running = -(-(running + unit) // unit) * unit
        strides[axis] = running
        running *= values.shape[axis]
    fill = float("nan") if values.dtype.is_floating_point else -77
    storage = torch.full((max(running, 1),), fill, device="cuda").to(values.dtype)
    view = storage.as_strided(values.shape, strides)
    view.copy_(values)
    return view


def poisoned_outputs(fusion, sizes, torch):
    """Each output, and after it in the same allocation GUARD elements of poison that no store
    may touch: (outputs, guards)."""
    out, guards = [], []
    for t in fusion.outputs:
        dtype = getattr(torch, TORCH_DTYPES[t.dtype.name])
        fill = float("nan") if dtype.is_floating_point else -77  # -77: no op of the inputs' range gives it everywhere
        shape = _shape(t, sizes)
        n = math.prod(shape)
        base = torch.full((n + GUARD,), fill, device="cuda").to(dtype)
        out.append(base[:n].view(shape))
        guards.append(base[n:])
    return out, guards


def written_past(guards, torch) -> int:
    """Guard elements a kernel overwrote (a store past the end of an output)."""
    changed = 0
    for g in guards:
        if g.dtype.is_floating_point:
            changed += int((~torch.isnan(g)).sum())
        else:
            changed += int((g != -77).sum())
    return changed


def wrong_elements(fusion, inputs, outs) -> tuple[int, int]:
    """(elements differing from the reference beyond the dtype's tolerance, elements compared)."""
    import numpy as np

    from tileproof.codegen.runtime.reference import reduction_slack, reference, tolerance

    host = [x.double().cpu().numpy() for x in inputs]
    wrong = total = 0
    for t, got, want, slack, tf32 in zip(fusion.outputs, outs, reference(fusion, host), reduction_slack(fusion, host),
                                         tf32_slack(fusion, host)):
        got = got.double().cpu().numpy()
        rtol, atol = tolerance(t.dtype)
        atol = atol + slack + tf32  # a float sum's error scales with its terms' magnitudes
        ok = (got == want) | (np.isnan(want) & np.isnan(got)) | (np.abs(got - want) <= atol + rtol * np.abs(want))
        wrong += int((~ok).sum())
        total += got.size
    return wrong, total


def tf32_slack(fusion, host) -> list:
    """Per output, what rounding a float32 MmaOp's operands to tf32 may add: 2^-10 times the
    outputs computed from |inputs| (|A| |B| for D itself), 0 without such an MmaOp."""
    import numpy as np

    from tileproof.codegen.runtime.reference import reference
    from tileproof.model.mma_op import is_mma

    if not any(is_mma(op.output) and op.inputs[0].dtype.name == "float32" for op in fusion.exprs):
        return [0.0] * len(fusion.outputs)
    magnitudes = reference(fusion, [np.abs(x) for x in host])
    return [TF32 * np.nan_to_num(np.abs(m), posinf=0.0) for m in magnitudes]


def run_and_judge(kernel, sizes: dict[str, int]) -> dict:
    """Launch once and judge: ran correctly, wrong output, refused at launch, or fault."""
    import torch

    import tileproof as tp

    inputs = random_inputs(kernel.fusion, sizes, torch)
    outs, guards = poisoned_outputs(kernel.fusion, sizes, torch)
    try:
        kernel.run(*inputs, out=outs, **sizes)
        torch.cuda.synchronize()
    except tp.InputError as e:
        return {"outcome": "refused at launch", "detail": str(e)[:400]}
    except Exception as e:  # noqa: BLE001 - the failure is the evidence
        return {"outcome": "fault", "detail": f"{type(e).__name__}: {e}"[:400]}
    wrong, total = wrong_elements(kernel.fusion, inputs, outs)
    past = written_past(guards, torch)
    del inputs, outs, guards
    torch.cuda.empty_cache()  # many workers share the GPU: keep no cached blocks between cases
    if past:
        return {"outcome": "wrote past an output", "elements": past, "wrong": wrong, "of": total, "sizes": sizes}
    if wrong:
        return {"outcome": "wrong output", "wrong": wrong, "of": total, "sizes": sizes}
    return {"outcome": "ran correctly", "of": total}


ATTENTION_TOLERANCE = 2e-2  # rtol and atol against softmax in float64: P and O are rounded to bfloat16


def attention_mask(torch, kind: str, rows: int, keys: int, gen):
    """A masked tile's Mask input, [1, 1, rows, keys] bfloat16: "causal" (recipes.attention.causal_mask),
    "random" (-inf at random, each row's first key kept) or "bias" (finite, 3 N(0, 1))."""
    from tileproof.recipes.attention import causal_mask

    if kind == "causal":
        return causal_mask(torch, rows, keys)
    if kind == "random":
        drop = torch.rand(rows, keys, generator=gen, device="cuda") < 0.5
        drop[:, 0] = False
        values = torch.zeros(rows, keys, device="cuda").masked_fill(drop, float("-inf"))
    elif kind == "bias":
        values = torch.randn(rows, keys, generator=gen, device="cuda") * 3
    else:
        raise ValueError(f"attention_mask: kind must be causal, random or bias, got {kind!r}")
    return values.to(torch.bfloat16).view(1, 1, rows, keys)


def run_attention_and_judge(kernel, tile, mask: str | None = None, seed: int = 0) -> dict:
    """An attention kernel (tileproof.recipes.attention; `tile` its AttentionTile, `mask` the kind
    of its Mask input where the tile is masked: attention_mask) launched once on random Q, K, V of
    PyTorch's [B, H, S, D] layout made its inputs by attention_views (as tests/gpu/test_attention.py
    does), into NaN-poisoned outputs each followed by guard elements, and judged within
    ATTENTION_TOLERANCE against softmax(Q K^T scale + Mask) V in float64; a causal tile (the mask
    computed in the kernel) against torch's scaled_dot_product_attention(is_causal=True) in float32
    where M == N, and against the bottom-right aligned causal_mask in float64 where M != N (SDPA's
    is_causal aligns top-left there). A second output (attention(..., lse=True)) is judged against
    each row's logsumexp of the scaled, masked scores in float64."""
    import torch
    import torch.nn.functional as F

    import tileproof as tp
    from tileproof.recipes.attention import attention_views, causal_mask

    gen = torch.Generator(device="cuda").manual_seed(seed)
    b, hkv = (2, tile.batch // 2) if tile.batch % 2 == 0 else (1, tile.batch)
    hq = hkv * tile.group
    q, k, v = (torch.randn(shape, generator=gen, device="cuda").to(torch.bfloat16) for shape in
               ((b, hq, tile.rows, tile.head_dim), (b, hkv, tile.keys, tile.head_dim),
                (b, hkv, tile.keys, tile.value_dim)))
    masks = [attention_mask(torch, mask, tile.rows, tile.keys, gen)] if mask is not None else []
    shapes = [(tile.batch, tile.group, tile.rows, tile.value_dim), (tile.batch, tile.group, tile.rows)]
    dtypes = [torch.bfloat16, torch.float32][:len(kernel.fusion.outputs)]
    bases = [torch.full((math.prod(shape) + GUARD,), float("nan"), device="cuda", dtype=dtype)
             for shape, dtype in zip(shapes, dtypes)]
    outs = [base[:math.prod(shape)].view(shape) for base, shape in zip(bases, shapes)]
    try:
        kernel.run(*attention_views(q, k, v), *masks, out=outs)
        torch.cuda.synchronize()
    except tp.InputError as e:
        return {"outcome": "refused at launch", "detail": str(e)[:400]}
    except Exception as e:  # noqa: BLE001 - the failure is the evidence
        return {"outcome": "fault", "detail": f"{type(e).__name__}: {e}"[:400]}
    kk, vv = (t.double().repeat_interleave(tile.group, dim=1) for t in (k, v))  # each query head's kv head
    scores = q.double() @ kk.transpose(-1, -2) * tile.softmax_scale
    for m in masks + ([causal_mask(torch, tile.rows, tile.keys)] if tile.causal else []):
        scores = scores + m.double().view(tile.rows, tile.keys)
    if tile.causal and tile.rows == tile.keys:  # SDPA's own causal semantics, not our mask's
        want = F.scaled_dot_product_attention(q.float(), kk.float(), vv.float(), is_causal=True,
                                              scale=tile.softmax_scale).double()
    else:
        want = torch.softmax(scores, dim=-1) @ vv
    wants = [want, torch.logsumexp(scores, dim=-1)][:len(outs)]
    wrong = 0
    for got, expected in zip(outs, wants):
        got = got.double().reshape(expected.shape)
        close = (got - expected).abs() <= ATTENTION_TOLERANCE + ATTENTION_TOLERANCE * expected.abs()  # NaN: not close
        wrong += int((~close).sum())
    n, past = sum(o.numel() for o in outs), written_past([base[o.numel():] for base, o in zip(bases, outs)], torch)
    del q, k, v, kk, vv, scores, masks, want, wants, bases, outs, got, expected, close
    torch.cuda.empty_cache()
    if past:
        return {"outcome": "wrote past an output", "elements": past, "wrong": wrong, "of": n}
    if wrong:
        return {"outcome": "wrong output", "wrong": wrong, "of": n}
    return {"outcome": "ran correctly", "of": n}
