"""Lowering of verified fusions to CUDA C++ (loop nest, allocation, indexing,
predicates), NVRTC compilation and launch.

May import model/ and verifier/; refuses to lower a fusion that did not verify.
"""
