"""Validation against measured kernels (Triton on a GPU, torch on the CPU) and calibration."""
