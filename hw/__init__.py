"""The hardware units, one file each, as pure functions of ints and index expressions: their
numbers, encodings, fragment maps and swizzles, written once for the verifier (which proves
schedules against them) and the code generator (which emits them).

    tma.py, tma_roles.py   the TMA a schedule implies: box, tile, tensor-map fields, swizzle
    mbarrier.py            arrive counts, expect-tx bytes and the phase of every wait
    ldmatrix.py            ldmatrix / stmatrix: lanes, registers and matrix rows
    mma.py                 tensor-core instructions and their register fragments
    wgmma.py               the wgmma shared-memory descriptor and the hardware swizzle
    tcgen05.py             tensor-memory addresses, data-path patterns, packing
    cp_async.py            cp.async copy sizes and cache operators
    global_load.py         ld.global.ca / .cg / .cs: a plain load of a fusion input with a cache operator
    threads.py             warps, warpgroups and linear thread ids
    mma_schedule.py        tp.schedule_mma_fragment: a register tile scheduled as an MMA fragment

May import model/ only: no execution analysis, no z3, no CUDA.
"""
