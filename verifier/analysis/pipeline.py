"""The claims CPASYNC-WAIT, PIPELINE-RAW and PIPELINE-WAR decide about a pipeline's Timeline
(model/pipeline.py), for a symbolic iteration, with z3 over the integers.

Program order: position i of iteration k is k * W + i (W: Timeline.width); prologue iterations
are k = -P'..-1, the loop's k = 0..E-1. A group is the copies a thread issued since its
previous commit; after `cp.async.wait_group N` all but the newest N committed groups are
complete. So the copy issued at position I is complete after a wait at position X with N
pending iff at least N + 1 commits lie in (I, X]: the first closes the copy's group, the others
are the newer groups the wait may leave in flight.

    complete(k)  the read of iteration k (data k) comes after the ISSUE of data k, and after a
                 WAIT that completes it, and a SYNC after that WAIT (groups are per thread:
                 other threads' copies are seen after the barrier)
    free(k, j)   the ISSUE at iteration k (data d = k + P, stage d % S) comes after a SYNC that
                 follows every READ of an older datum j < d of the same stage

A TMA Timeline (a circular buffer of TMA loads, an mbarrier per stage) has no groups: the WAIT
of iteration k is every thread's own wait on mbarrier k % S for its (k / S)-th phase, which the
load of data k completes, so complete(k) is the ISSUE of data k, then a WAIT of iteration k,
then the READ of k, in the issuing thread's program order (no barrier: each thread waits). That
no mbarrier runs a phase ahead of a waiter follows from free(k, j): the load of data k + S is
issued after a barrier that follows every READ of k, and each thread's READ of k follows its WAIT.

An asynchronous reader (a wgmma) is done with iteration j's data only at the first wgmma wait
after its READ in that scope: a wait leaving N batches in flight at iteration j + N (a wait
placed before the READ in the body counts from the next iteration). free(k, j)
then needs its SYNC after that wait (where the scope holds none, the reader's own subtree waits
for it: the READ).

A private Timeline (a register circular buffer: each thread copies into and reads its own
registers) needs program order only: complete(k) is the ISSUE of data k before the READ of k,
free(k, j) every READ of j before the ISSUE at k.

A warp-specialized Timeline (model/warp_roles.py) has two programs: the producer's iteration k
waits for the stage to be released (EMPTY_WAIT) and loads data k into stage k % S; the
consumers' iteration k waits for full[k % S] (WAIT), reads, and releases the datum L iterations
back (RELEASE), the last L data after the loop. Both enumerate the same data in the same order,
one load and one wait (one release and one producer wait) per datum, so the n-th wait on a
stage's mbarrier is for its n-th phase:
    complete(k)  a WAIT of the consumers' iteration k comes before its READ (and the producer loads k)
    free(j)      datum j is released exactly once (in the loop where j + L < E, else by the tail),
                 after the consumer's reads of j are done (its READ, or for a wgmma the first wait
                 covering j's batch), and the producer's refill of j's stage (data j + S) follows
                 its EMPTY_WAIT on that release.

Each check takes the latest WAIT instance before the read and the earliest SYNC after a WAIT
or a READ: those are the best candidates, so the claim holds iff some candidate does. The
extent E is the loop's where it is a constant, else every E >= 1 (a proof for more sizes than
admitted). Each claim is a fresh solver, in the verify's z3 context (`context`; None: a
fresh one); unsat is proved, unknown is not.
"""

from __future__ import annotations

import z3

from ...hw.mbarrier import phase_of_wait
from ...model.expr import try_int
from ...execution.pipeline import Step, Timeline
from ..solver import DEFAULT_TIMEOUT_MS, MAX_EXTENT, Outcome, Verdict, check, units, why_unknown


class _Model:
    """Positions and commit counts of one Timeline in a z3 context (the verify's, else a fresh one)."""

    def __init__(self, tl: Timeline, context: z3.Context | None):
        self.tl = tl
        self.ctx = context if context is not None else z3.Context()
        self.w = tl.width
        self.p = tl.prefetch
        self.pro = tl.prologue_iterations
        self.facts = []
        e = try_int(tl.extent)
        self.e = z3.Int("extent", self.ctx)
        self.facts.append(self.e == e if e is not None else z3.And(self.e >= 1, self.e <= MAX_EXTENT))

    def int(self, name: str):
        return z3.Int(name, self.ctx)

    def val(self, n: int):
        return z3.IntVal(n, self.ctx)

    def pos(self, k, i: int):
        return k * self.w + i

    def issue(self, k):
        """(position, issued) of the copy at iteration k: the loop's ISSUE, or the prologue's for k < 0."""
        body = self.tl.positions(Step.ISSUE)
        pro = self.tl.positions(Step.ISSUE, prologue=True)
        a = self.val(body[0]) if body else None
        b = self.val(pro[0]) if pro else None
        in_loop = z3.And(k >= 0, k < self.e) if a is not None else z3.BoolVal(False, self.ctx)
        in_pro = z3.And(k < 0, k >= -self.pro) if b is not None else z3.BoolVal(False, self.ctx)
        where = z3.If(k >= 0, a if a is not None else self.val(0), b if b is not None else self.val(0))
        return self.pos(k, 0) + where, z3.Or(in_loop, in_pro)

    def commits(self, x, y):
        """The commits at positions in (x, y]."""
        total = self.val(0)
        for c in self.tl.positions(Step.COMMIT):
            total = total + self._count(x, y, c, self.val(0), self.e)
        for c in self.tl.positions(Step.COMMIT, prologue=True):
            total = total + self._count(x, y, c, self.val(-self.pro), self.val(0))
        return total

    def _count(self, x, y, c: int, lo, hi):
        """#k in [lo, hi) with x < k * W + c <= y (z3's integer division floors for W > 0)."""
        first = _max((x - c) / self.w + 1, lo)
        last = _min((y - c) / self.w, hi - 1)
        return z3.If(last >= first, last - first + 1, self.val(0))

    def prove(self, k_vars, claim, values) -> Outcome:
        s = z3.Solver(ctx=self.ctx)
        s.add(*self.facts)
        s.add(z3.Not(claim))
        allowed = units(DEFAULT_TIMEOUT_MS)
        r = check(s, allowed)[0]
        if r == z3.unsat:
            return Outcome(Verdict.PROVED)
        if r == z3.unknown:
            return Outcome(Verdict.UNKNOWN, reason=why_unknown(s, DEFAULT_TIMEOUT_MS))
        m = s.model()
        for v in list(k_vars) + [self.e]:  # the smallest iteration that fails, for a readable report
            s.push()
            for _ in range(64):
                cur = m.eval(v, model_completion=True).as_long()
                s.add(v < cur)
                if check(s, allowed)[0] != z3.sat:
                    break
                m = s.model()
            s.pop()
            s.add(v == m.eval(v, model_completion=True))
            if check(s, allowed)[0] == z3.sat:
                m = s.model()
        model = {str(v): m.eval(v, model_completion=True).as_long() for v in list(k_vars) + [self.e]}
        derived = {name: m.eval(t, model_completion=True).as_long() for name, t in values.items()}
        return Outcome(Verdict.COUNTEREXAMPLE, model, values=derived)


def _max(a, b):
    return z3.If(a >= b, a, b)


def _min(a, b):
    return z3.If(a <= b, a, b)


def prove_complete(tl: Timeline, context: z3.Context | None = None) -> Outcome:
    """A warp-specialized Timeline: _specialized_complete. Otherwise: CPASYNC-WAIT's claim: for all k in [0, E), complete(k) (module docstring). A counterexample
    gives the iteration `k` and whether the data was issued before the read (`issued`), the
    commits after its copy up to the last wait (`commits`) and that wait's `pending`."""
    if tl.specialized:
        return _specialized_complete(tl, context)
    # Formal statement: for all E and k in [0, E), r the READ: issued(k - P) and I(k) < R(k) and
    #   exists a WAIT w (latest instance before R) with I(k) < X_w and commits(I(k), X_w] >= N_w + 1
    #   and a SYNC after X_w before R(k); a synchronous copy (a plain copy into shared memory): a SYNC
    #   between I(k - P) and R(k)
    m = _Model(tl, context)
    k = m.int("iteration")
    r = tl.positions(Step.READ)[0]
    read = m.pos(k, r)
    at, issued = m.issue(k - m.p)
    options = []
    best_commits, best_pending = m.val(-1), m.val(-1)
    for w in tl.positions(Step.WAIT):
        kw = k if w < r else k - 1
        x = m.pos(kw, w)
        n = tl.body[w].pending
        covered = m.commits(at, x)
        syncs = []
        for s in tl.positions(Step.SYNC):
            ks = kw if s > w else kw + 1
            syncs.append(z3.And(m.pos(ks, s) < read, ks < m.e))
        options.append(z3.And(kw >= 0, x > at, covered >= n + 1, z3.Or(*syncs) if syncs else z3.BoolVal(False, m.ctx)))
        best_commits, best_pending = z3.If(x > at, covered, best_commits), z3.If(x > at, m.val(n), best_pending)
    waited = z3.Or(*options) if options else z3.BoolVal(False, m.ctx)
    if tl.synchronous:  # a plain copy is complete when written: a SYNC between it and the read shows it to all
        waited = z3.Or(*[z3.And(ks >= 0, m.pos(ks, s) > at)
                         for s in tl.positions(Step.SYNC) for ks in [k if s < r else k - 1]], z3.BoolVal(False, m.ctx))
    if tl.tma:  # the thread's own wait on iteration k's stage and phase, after the issue, before the read
        waited = z3.Or(*[m.pos(k, w) > at for w in tl.positions(Step.WAIT) if w < r], z3.BoolVal(False, m.ctx))
    claim = z3.And(issued, at < read) if tl.private else z3.And(issued, at < read, waited)
    m.facts += [k >= 0, k < m.e]
    values = {"issued before the read": z3.If(z3.And(issued, at < read), m.val(1), m.val(0))}
    if not tl.private:
        values.update({"commits after its copy": best_commits, "pending allowed": best_pending})
    return m.prove([k], claim, values)


def prove_free(tl: Timeline, context: z3.Context | None = None) -> Outcome:
    """A warp-specialized Timeline: _specialized_free. Otherwise: PIPELINE-WAR's claim: for every copy (iteration k, data d = k + P, stage d % S) and every
    older datum j < d of that stage, a SYNC after the READ of j comes before the copy. A
    counterexample gives the refilling iteration `k`, the data `d` it copies, the older `j`
    still to be read, and their `stage`."""
    if tl.specialized:
        return _specialized_free(tl, context)
    # Formal statement: for all E, k in [-P', E), j in [0, E) with issued(k), 0 <= d = k + P < E, j < d and
    #   j % S == d % S: exists a SYNC at position X with R(j) < X < I(k) (R(j): the READ of iteration j)
    m = _Model(tl, context)
    k, j = m.int("refill iteration"), m.int("read iteration")
    r = tl.positions(Step.READ)[0]
    at, issued = m.issue(k)
    d = k + m.p
    done, done_at = j, r  # where the reads of j are over: the READ, or an asynchronous reader's wait
    waits = tl.positions(tl.read_wait) if tl.async_read else []
    later = [w for w in waits if w > r]
    if later:  # the first wait after the read, in its iteration
        done, done_at = j + tl.body[later[0]].pending, later[0]
    elif waits:  # else the first one of the next iteration
        done, done_at = j + 1 + tl.body[waits[0]].pending, waits[0]
    elif tl.store_read:  # a TMA store's reads end at a bulk wait only: none in the loop, never done in it
        done = m.e
    syncs = []
    for s in tl.positions(Step.SYNC):
        js = done if s > done_at else done + 1
        syncs.append(z3.And(js < m.e, m.pos(js, s) < at))
    claim = z3.Or(*syncs) if syncs else z3.BoolVal(False, m.ctx)
    if tl.private:  # the thread's own registers: its read of j comes first in program order
        claim = m.pos(j, r) < at
    m.facts += [issued, d >= 0, d < m.e, j >= 0, j < d, j % tl.stages == d % tl.stages]
    values = {"data": d, "stage": d % tl.stages}
    return m.prove([k, j], claim, values)


def _specialized_complete(tl: Timeline, context: z3.Context | None = None) -> Outcome:
    """PIPELINE-RAW, warp-specialized: for all k in [0, E), the producer loads datum k (an ISSUE
    in its iteration) and the consumers' iteration k waits (WAIT) before its READ."""
    # Formal statement: for all E and k in [0, E): ISSUE in producer(k) and exists a WAIT w of the
    #   consumers' iteration k with pos(k, w) < pos(k, r)
    m = _Model(tl, context)
    k = m.int("iteration")
    r = tl.positions(Step.READ)[0]
    issued = any(e.step is Step.ISSUE for e in tl.producer)
    waited = z3.Or(*[m.pos(k, w) < m.pos(k, r) for w in tl.positions(Step.WAIT)], z3.BoolVal(False, m.ctx))
    if tl.ahead:  # rotated: datum k's wait and read run in iteration k - 1, datum 0's before the loop
        body = any(tl.body[w].ahead == tl.ahead for w in tl.positions(Step.WAIT) if w < r)
        pr = [i for i, e in enumerate(tl.rotated) if e.step is Step.READ]
        first = bool(pr) and any(e.step is Step.WAIT for e in tl.rotated[:pr[0]])
        waited = z3.If(k == 0, z3.BoolVal(first, m.ctx), z3.BoolVal(body, m.ctx))
    m.facts += [k >= 0, k < m.e]
    values = {"issued before the read": m.val(int(issued))}
    return m.prove([k], z3.And(z3.BoolVal(issued, m.ctx), waited), values)


def _specialized_free(tl: Timeline, context: z3.Context | None = None) -> Outcome:
    """PIPELINE-WAR, warp-specialized: every datum j is released once, after its reads are done,
    and the producer waits for the release before refilling the stage (module docstring). A
    counterexample gives the datum `read iteration` and the values `released` (how many
    releases cover it), `release position` and `reads done at` (positions in the consumers'
    program order, iteration x W + step; -1: never)."""
    # Formal statement: EMPTY_WAIT before ISSUE in the producer's body, and for all E, j in [0, E):
    #   (j + L < E) + (j >= E - L_tail) == 1 and done(j) < release(j), where release(j) = pos(j + L, RELEASE)
    #   or E * W + (the tail RELEASE's step), and done(j) = pos(j, READ), or for a wgmma reader the first
    #   wgmma wait covering j's batch (iteration j + N, or the tail's wait)
    m = _Model(tl, context)
    j = m.int("read iteration")
    never = m.val(-1)
    r = tl.positions(Step.READ)[0]
    tail_at = m.e * m.w

    def tail_step(step: Step, pending: int | None = None):
        k = next((t for t, e in enumerate(tl.tail) if e.step is step and (pending is None or e.pending == pending)), None)
        return None if k is None else tail_at + k

    done = m.pos(j, r)
    counted = tl.ahead or any(e.step is Step.MMA_COMMIT for e in tl.body)
    if counted:  # a rotated loop's: batches committed alone, several an iteration
        done = _counted_done(m, tl, j, tail_at)
    elif tl.async_read:
        waits = tl.positions(tl.read_wait)
        final = tail_step(tl.read_wait, 0)
        later = [w for w in waits if w > r]
        it, at = (j + tl.body[later[0]].pending, later[0]) if later else \
            (j + 1 + tl.body[waits[0]].pending, waits[0]) if waits else (None, None)
        fallback = final if final is not None else never
        done = fallback if it is None else z3.If(it < m.e, m.pos(it, at), fallback)
    release, in_loop, in_tail, before = _release_at(m, tl, j)
    p_wait = [k for k, e in enumerate(tl.producer) if e.step is Step.EMPTY_WAIT]
    p_issue = [k for k, e in enumerate(tl.producer) if e.step is Step.ISSUE]
    guarded = bool(p_wait) and bool(p_issue) and p_wait[0] < p_issue[0]
    released = z3.If(in_loop, 1, 0) + z3.If(in_tail, 1, 0) + z3.If(before, 1, 0)
    claim = z3.And(z3.BoolVal(guarded, m.ctx), released == 1, done >= (-m.w if counted else 0), done < release)
    m.facts += [j >= 0, j < m.e]
    values = {"stage": j % tl.stages, "released": released,
              "release position": z3.If(z3.Or(in_loop, in_tail, before), release, never), "reads done at": done,
              "refill waits for the release": m.val(int(guarded))}
    return m.prove([j], claim, values)


def _release_at(m: _Model, tl: Timeline, datum):
    """(position, in the loop, after it, before it) of the consumers' release of `datum`: the loop's
    RELEASE in iteration datum + lag, or, in the rotated statements (ahead, for datum i + 1 -
    lag: they run where i + 1 < E), in iteration datum + lag - 1, and for datum -lag + 0 in
    their copy before the loop; else the tail's after the loop. The position is -1 where none."""
    never = m.val(-1)
    rel = tl.positions(Step.RELEASE)
    event = tl.body[rel[0]] if rel else None
    lag, shift = (event.pending, event.ahead) if event else (0, 0)
    it = datum + lag - shift
    in_loop = z3.And(z3.BoolVal(bool(rel), m.ctx), it >= 0, it + shift < m.e)
    pro_rel = next((p for p, e in enumerate(tl.rotated) if e.step is Step.RELEASE), None)
    before = z3.And(z3.BoolVal(bool(shift) and pro_rel is not None, m.ctx), it == -1)
    tail_rel = next((t for t, e in enumerate(tl.tail) if e.step is Step.RELEASE), None)
    in_tail = z3.BoolVal(False, m.ctx) if tail_rel is None else datum >= m.e - tl.tail[tail_rel].pending
    release = z3.If(in_loop, m.pos(it, rel[0]) if rel else never,
                    z3.If(before, m.val(-m.w + (pro_rel or 0)),
                          m.e * m.w + tail_rel if tail_rel is not None else never))
    return release, in_loop, in_tail, before


def _rotated_at(m: _Model, tl: Timeline, datum, i: int, prologue_i: int | None):
    """The position of a rotated step (body position i, prologue position prologue_i) for `datum`:
    iteration datum - ahead of the loop, the steps before the loop (iteration -1) for datum 0."""
    it = datum - tl.ahead
    before = m.val(-m.w + prologue_i) if prologue_i is not None else m.val(-m.w - 1)
    return z3.If(it >= 0, m.pos(it, i), before)


def _counted_done(m: _Model, tl: Timeline, j, tail_at):
    """Where the READ of datum j is done in a loop whose batches are committed alone (a rotated
    loop's: the READ of datum j in iteration j - ahead, datum 0's before the loop): the READ
    itself, or for a wgmma reader the first wgmma wait after it with more commits since the READ
    than the batches it leaves in flight (the READ's own group's commit and the newer ones:
    several batches an iteration count one each), at most three iterations on, else the wait
    after the loop; -W - 1 (before any position) where none is."""
    r = tl.positions(Step.READ)[0]
    pr = next((i for i, e in enumerate(tl.rotated) if e.step is Step.READ), None)
    read = _rotated_at(m, tl, j, r, pr)
    if not tl.async_read:
        return read
    commits = [i for i, e in enumerate(tl.body) if e.step is Step.MMA_COMMIT or (e.step is Step.MMA_WAIT and e.commit)]
    pro_commits = [i for i, e in enumerate(tl.rotated) if e.step is Step.MMA_COMMIT or (e.step is Step.MMA_WAIT and e.commit)]

    def committed(x, y):  # the commits at positions in (x, y], the loop's and those before it
        total = m.val(0)
        for c in commits:
            total = total + m._count(x, y, c, m.val(0), m.e)
        for c in pro_commits:
            total = total + m._count(x, y, c, m.val(-1), m.val(0))
        return total

    it = j - tl.ahead
    waits = [(i, e.pending) for i, e in enumerate(tl.body) if e.step is Step.MMA_WAIT]
    pro_waits = [(i, e.pending) for i, e in enumerate(tl.rotated) if e.step is Step.MMA_WAIT]
    final = next((tail_at + t for t, e in enumerate(tl.tail) if e.step is Step.MMA_WAIT and e.pending == 0), None)
    candidates = []  # (position, valid), in program order
    for i, n in pro_waits:  # before the loop (datum 0's read there)
        x = m.val(-m.w + i)
        candidates.append((x, z3.And(it < 0, x > read, committed(read, x) >= n + 1)))
    for t in range(3):
        for i, n in waits:
            x = m.pos(it + t, i)
            candidates.append((x, z3.And(it + t >= 0, it + t < m.e, x > read, committed(read, x) >= n + 1)))
    done = final if final is not None else m.val(-m.w - 1)
    for x, ok in reversed(candidates):  # the first valid one: nested from the last
        done = z3.If(ok, x, done)
    return done


def _per_stage(m: _Model, stages: int, s):
    """#k in [0, E) with k % stages == s (s < stages): the data of stage s in one run of the loop."""
    return (m.e - s + stages - 1) / stages


def prove_phase(tl: Timeline, context: z3.Context | None = None) -> Outcome:
    """PIPELINE-PHASE's claim on a TMA Timeline (module docstring of verifier/rules/pipeline.py's
    rule): every wait is on the mbarrier and for the phase of the datum it needs, and no phase
    completes before the waits for the previous one. A counterexample gives the run `run` (0 or 1)
    and `iteration` (datum) k, and the values `wait` (which wait of the iteration: the t-th full
    wait, or `empty wait t`), `stage waited`, `phase waited`, `stage of the datum`, `phase of the
    datum` and `phase order` (1 where the next phase follows the waits)."""
    # Formal statement: for all E, runs r in {0, 1}, k in [0, E), S the buffer's stages, with
    #   n(S', x) = r * #{k' in [0, E): k' % S' == x % S'} + x / S' (the x-th datum's use of its stage over runs):
    #   (full) the t-th of the W waits of iteration k (stages S_w) waits on full[k % S_w] for phase W n(S_w, k) + t
    #     (hw/mbarrier.py phase_of_wait: the thread's (W n(S_w, k) + t)-th wait on that mbarrier),
    #     which is datum k's: k % S_w == k % S and W n(S_w, k) + t == n(S, k)
    #   (empty) the t-th of the producer's W' waits for datum k (stages S_e; bits start at 1) waits on empty[k % S_e]
    #     for phase W' n(S_e, k) + t - 1, the release of the datum before k in its stage: k % S_e == k % S and
    #     that phase == n(S, k) - 1; and each release's stages S_r: k % S_r == k % S
    #   (order) the load of datum k + S follows every wait for k: a SYNC between them (one program), or
    #     EMPTY_WAIT before ISSUE in the producer and every WAIT of k before k's release (warp specialization)
    m = _Model(tl, context)
    k, r = m.int("iteration"), m.int("run")
    m.facts += [k >= 0, k < m.e, r >= 0, r <= 1]
    S = tl.stages

    def n(stages, x):
        return z3.If(r == 1, _per_stage(m, stages, x % stages), 0) + x / stages

    # (which wait, stage waited, phase waited, stage of the datum, its phase)
    checks: list[tuple[str, object, object, object, object]] = []
    waits = [e for e in tl.body if e.step is Step.WAIT]
    for t, e in enumerate(waits):
        sw = e.stages or 1
        checks.append((f"wait {t}", k % sw, phase_of_wait(len(waits) * n(sw, k) + t, empty=False), k % S, n(S, k)))
    empties = [e for e in tl.producer if e.step is Step.EMPTY_WAIT]
    for t, e in enumerate(empties):
        se = e.stages or 1
        checks.append((f"empty wait {t}", k % se, phase_of_wait(len(empties) * n(se, k) + t, empty=True), k % S,
                       n(S, k) - 1))
    for sr in sorted({e.stages or 1 for e in tl.body + tl.tail if e.step is Step.RELEASE}):
        checks.append(("release", k % sr, n(sr, k), k % S, n(S, k)))
    claims = [z3.And(sw == sd, pw == pd) for _, sw, pw, sd, pd in checks]
    first = m.val(len(checks))  # the first check that fails, for the report
    for idx in reversed(range(len(checks))):
        first = z3.If(z3.Not(claims[idx]), m.val(idx), first)
    values = {"wait": first}
    for name, pick in (("stage waited", 1), ("phase waited", 2), ("stage of the datum", 3), ("phase of the datum", 4)):
        v = m.val(-1)
        for idx in reversed(range(len(checks))):
            v = z3.If(first == idx, checks[idx][pick], v)
        values[name] = v
    order = _phase_order(m, tl, k)
    values["phase order"] = z3.If(order, m.val(1), m.val(0))
    out = m.prove([r, k], z3.And(*claims, order), values)  # the first run first
    if out.status is Verdict.COUNTEREXAMPLE:
        out.values["wait"] = ([c[0] for c in checks] + ["-"])[out.values["wait"]]
    return out


def _phase_order(m: _Model, tl: Timeline, k):
    """The load of datum k + S comes after every wait for datum k (PIPELINE-PHASE's order)."""
    waits = tl.positions(Step.WAIT)
    if tl.specialized:
        p_wait = [i for i, e in enumerate(tl.producer) if e.step is Step.EMPTY_WAIT]
        p_issue = [i for i, e in enumerate(tl.producer) if e.step is Step.ISSUE]
        guarded = bool(p_wait) and bool(p_issue) and p_wait[0] < p_issue[0]
        release = _release_at(m, tl, k)[0]
        if not tl.ahead:
            return z3.And(z3.BoolVal(guarded, m.ctx), *[z3.And(release >= 0, m.pos(k, w) < release) for w in waits])
        # rotated: datum k's waits run in iteration k - 1 (before the loop for k = 0); and the release of k
        # comes before the consumers' wait for k + S, whose load the producer issues only after that release
        pro = [i for i, e in enumerate(tl.rotated) if e.step is Step.WAIT]
        at = [(w, pro[n] if n < len(pro) else None) for n, w in enumerate(waits)]
        return z3.And(z3.BoolVal(guarded, m.ctx),
                      *[z3.And(release >= 0, _rotated_at(m, tl, k, w, p) < release) for w, p in at],
                      *[z3.Or(k + tl.stages >= m.e, release < _rotated_at(m, tl, k + tl.stages, w, p)) for w, p in at])
    at, issued = m.issue(k + tl.stages - m.p)
    last = max(waits, default=-1)
    syncs = []
    for s in tl.positions(Step.SYNC):  # the first barrier after iteration k's waits
        ks = k if s > last else k + 1
        syncs.append(z3.And(ks < m.e, m.pos(ks, s) < at))
    return z3.Or(z3.Not(issued), k + tl.stages >= m.e, *syncs)  # no next phase of the stage in this run, or after


__all__ = ["prove_complete", "prove_free", "prove_phase"]
