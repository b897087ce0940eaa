"""Lowering of verified fusions to CUDA C++ (loop nest, allocation, indexing,
predicates), NVRTC compilation and launch.

    compile.py      tp.compile and the Kernel it returns (caches, run, benchmark)
    lower.py        the pass list: fusion -> kernel IR (kernel_ir.py)
      loop_nest.py    loop classes from compute-at, the loop tree
      statements.py   one statement per tensor: offsets, predicates, vectorization
      gmem.py         strides of global tensors from contiguity
      (indices and predicates are simplified by model/simplify.py, as the verifier's terms are)
      syncs.py        __syncthreads placement
      tma.py          TMA copies from model/tma_layout.py (C++ in emit_tma.py; tensor_maps.py encodes at launch)
      ldsm.py         ldmatrix / stmatrix: each lane's row address from the index algebra
      predicates.py   holes ruled out by the fusion's assumptions (z3)
      tmem.py         tensor memory: tcgen05 ld/st from the verifier's access model, alloc, fences
                      (nodes in tmem_ir.py, their C++ in emit_tmem.py)
    emit.py         kernel IR -> C++ (index math through cuda_expr.py)
    nvrtc.py        NVRTC compile and the on-disk cubin cache
    runtime.py      the CUDA driver; arrays.py, binding.py: run() arguments
    reference.py    a float64 numpy reference for checking kernels

May import model/ and verifier/; refuses to lower a fusion that did not verify.
"""
