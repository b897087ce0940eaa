"""tileproof.testing.compile_unverified: builds rejected schedules, marked unverified; the
public tp.compile still refuses them."""

from __future__ import annotations

from pathlib import Path

import pytest

import tileproof as tp
from tileproof.schedule_files import discover
from tileproof.testing import UNVERIFIED_BANNER, compile_unverified

ROOT = Path(__file__).resolve().parents[2]
CASE = next(c for c in discover([str(ROOT / "examples" / "invalid" / "thread_visibility.py")])
            if c.name == "registers_on_tidx_read_on_tidy")


def test_a_rejected_schedule_is_built_and_marked_unverified():
    kernel = compile_unverified(CASE.build(), CASE.target)
    assert kernel.verified is False
    assert kernel.report.codes == ["THREAD-VISIBILITY"]
    assert kernel.cuda_source.startswith(UNVERIFIED_BANNER)


def test_tp_compile_still_refuses_it():
    with pytest.raises(tp.ScheduleRejected):
        tp.compile(CASE.build(), CASE.target)


def test_an_accepted_schedule_is_marked_verified():
    fixed = next(c for c in discover([str(ROOT / "examples" / "valid" / "thread_visibility.py")])
                 if c.name == "registers_stored_by_their_threads")
    kernel = compile_unverified(fixed.build(), fixed.target)
    assert kernel.verified is True and UNVERIFIED_BANNER not in kernel.cuda_source
    assert tp.compile(fixed.build(), fixed.target).verified is True


def _invalid(file: str, name: str):
    return next(c for c in discover([str(ROOT / "examples" / "invalid" / file)]) if c.name == name)


@pytest.mark.parametrize("file, name, code, says", [
    ("cp_async.py", "circular_loop_on_blocks", "PIPELINE-STAGES", "blockIdx.y, a block index and not a loop"),
    ("tma_rules.py", "tma_rank_six", "TMA-RANK", "6 dimensions; cp.async.bulk.tensor has 1d to 5d forms"),
    ("cp_async.py", "cg_eight_bytes", "CPASYNC-SIZE", "moves 8 bytes with cp.async.cg.shared.global"),
])
def test_a_rejected_schedule_the_code_generator_cannot_build_is_refused_not_a_bug(file, name, code, says):
    """compile_unverified refuses it with NotBuilt (an UnsupportedSchedule naming the rejection),
    never an InternalError or "tileproof bug" (before: `for (unsigned long long blockIdx.y = 0; ...`
    failed in NVRTC, a 6-D TMA in ptxas, both as a tileproof bug)."""
    from tileproof.testing import NotBuilt

    case = _invalid(file, name)
    with pytest.raises(NotBuilt) as e:
        compile_unverified(case.build(), case.target)
    assert isinstance(e.value, tp.UnsupportedSchedule) and not isinstance(e.value, tp.InternalError)
    message = str(e.value)
    assert code in e.value.report.codes and code in message and says in message
    assert "tileproof bug" not in message and "yet the schedule verified" not in message


def test_a_negative_prefetch_built_anyway_has_no_prologue():
    """prefetch_behind (prefetch -1) lowered: the prologue loop runs 0 times, not `i < -1` in an
    unsigned index (2^64 - 1 iterations: the kernel never finished on an H100)."""
    from tileproof.codegen.emit import emit
    from tileproof.codegen.lower import lower
    from tileproof.model.targets import get_target

    case = _invalid("cp_async.py", "prefetch_behind")
    source = emit(lower(case.build().snapshot(), get_target(case.target)).kernel, cuda_headers=False)
    assert "i1 < 0; ++i1)" in source and "< -1;" not in source
