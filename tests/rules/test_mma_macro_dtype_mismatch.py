"""Regression (found by the fuzzer's mma family): an MmaOp whose macro does not take its operands'
dtype (a tf32 macro on bfloat16, a wgmma macro on float32), with Mma axes bound, is rejected by
MMA-DTYPE / MMA-TARGET; REDUCTION-ACCUMULATOR used to crash asking the macro for its fragment."""

import pytest

import tileproof as tp


@pytest.mark.parametrize("dtype, macro, code", [
    (tp.bfloat16, tp.MmaMacro.Ampere_16_8_8, "MMA-DTYPE"),
    (tp.float32, tp.MmaMacro.Ampere_16_8_16, "MMA-DTYPE"),
    (tp.float32, tp.MmaMacro.Hopper_64_8_16, "MMA-DTYPE"),  # wgmma takes bfloat16 / float16
])
def test_macro_of_another_dtype_is_rejected_without_a_crash(dtype, macro, code):
    with tp.Fusion("f") as f:
        a = tp.make_tensor([16, 1, 8], dtype=dtype)
        b = tp.make_tensor([1, 8, 8], dtype=dtype)
        f.add_input(a)
        f.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        f.add_output(d)
    d.definition.set_macro(macro)
    for i in range(3):
        d.axis(i).parallelize(tp.ParallelType.Mma)
    report = tp.verify(f, "sm_90a")
    assert code in report.codes
    assert not [e for e in report.errors if "tileproof bug" in e.message], report.codes
