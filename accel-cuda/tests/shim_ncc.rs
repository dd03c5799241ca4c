//! `kernels/ncc.cu` on the CPU shim against the CPU backend.
