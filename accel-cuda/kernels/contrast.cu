// contrast kernels (the core module of the same name).
#include "common.cuh"
