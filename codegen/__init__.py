"""Lowering of verified fusions to CUDA C++ (loop nest, allocation, indexing,
predicates), NVRTC compilation and launch. Three stages, one folder each, in pipeline order:

    compile.py        tp.compile and the Kernel it returns (caches, run, benchmark): the stages below
    torch_op.py       tp.as_torch_op: a Kernel (or a recipe entry) as a torch.library operator with a
                      fake implementation (torch imported only there, when an operator is made)
    errors.py         errors of the code generator and the runtime
    ir.py             the kernel IR (plain data): what lower/ produces and emit/ prints
    lower/            fusion -> kernel IR; __init__.py is the pass list
      loop_nest.py      loop classes from compute-at; the kernel's tree: the placed nest the verifier
                        proved (execution/nest.py, its barriers, waits and pipelines), statements lowered
      statements.py     one statement per tensor: offsets, predicates, vectorization
      gmem.py           strides of global tensors from contiguity
      (indices and predicates are simplified by model/simplify.py, as the verifier's terms are)
      pipelines.py      circular buffers' prologues and prefetched copies (execution/pipeline.py)
      warp_roles.py     a warp-specialized kernel's producer issuers and empty mbarriers
      tma.py            TMA copies from execution/tma_issue.py
      cp_async.py       cp.async copies: cp-size and cache from execution/cp_async.py, holes as src-size 0
      mma.py            mma.sync, wgmma and tcgen05.mma statements of an MmaOp; reduction.py, a reduction's steps
      ldsm.py           ldmatrix / stmatrix: each lane's row address from the index algebra
      predicates.py     holes ruled out by the fusion's assumptions (z3)
      tmem.py           tensor memory: tcgen05 ld/st from the verifier's access model, alloc, fences
    emit/             kernel IR -> C++; __init__.py is the node -> lines table
      cuda_expr.py      index math (the Expr algebra) as C++
      tma.py            TMA: descriptors, mbarriers, cp.async.bulk.tensor
      cp_async.py       cp.async, cp.async.commit_group / wait_group inline PTX
      ldsm.py           ldmatrix / stmatrix inline PTX
      tmem.py           tcgen05 inline PTX
      mma.py            mma.sync / wgmma / tcgen05.mma inline PTX; mma_probe.py, the tensor-core layout probe kernel
      reduction.py      a reduction's init and the block's combine
    runtime/          C++ -> cubin -> launch
      nvrtc.py          NVRTC compile and the on-disk cubin cache
      ptxas.py          the kernel's registers, spills and stack frame from ptxas's verbose log
      driver.py         the CUDA driver: context, modules, launches, memory, timing
      arrays.py         run() arguments and outputs (PyTorch tensors, DLPack, __cuda_array_interface__),
                        their launch signatures, the default stream
      prepared.py       a launch prepared once per argument signature: the packed arguments
      binding.py        binding arguments to the kernel's extents and strides
      tensor_maps.py    encoding TMA tensor maps at launch
      reference.py      a float64 numpy reference for checking kernels

May import model/, hw/, execution/ and verifier/ (verify and its Report); refuses to lower a
fusion that did not verify.
lower/ imports neither emit/ nor runtime/; emit/ does not import lower/.
"""
