//! `kernels/glare.cu` on the CPU shim against the CPU backend.
