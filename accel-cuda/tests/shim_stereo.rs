//! `kernels/stereo.cu` on the CPU shim against the CPU backend.
