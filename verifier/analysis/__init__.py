"""Analysis shared by rules and by codegen; rules import analysis, never each other.

    ldsm.py     the ldmatrix / stmatrix access model and the terms the LDSM rules prove
    tma.py      the TMA each TMA op implies (model/tma.py), inferred once per fusion
    tmem.py     tensor-memory access models with lanes and columns; which accesses are
                warp-collective and which tcgen05 pattern each matches (codegen/lower/tmem.py
                lowers exactly what these proved)

May import model/ and verifier's access.py, context.py, solver.py and findings.py; never
verifier/rules/, codegen/ or reports/.
"""
