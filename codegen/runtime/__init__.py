"""C++ source -> cubin and ptxas's registers and spills (nvrtc.py, ptxas.py) -> launch through the
CUDA driver (driver.py), with run()'s arguments bound and checked (arrays.py, binding.py,
tensor_maps.py). See codegen/__init__.py."""
