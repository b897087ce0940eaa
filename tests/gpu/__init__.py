"""The GPU tests, a package: their module names (gpu.test_*) do not clash with the CPU tests of the
same subject elsewhere under tests/ (test_wgmma.py in rules/ and here)."""
