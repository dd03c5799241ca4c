// Matrix sum and product for f32 (linalg.rs in the core). A matrix is row-major, `stride`
// floats per row.
#include "common.cuh"

// out = a + b: one thread per element, a 2-D grid of 32 x 8 blocks.
extern "C" __global__ void mat_add_f32(const float* a, const float* b, float* out, int width, int height, int stride) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    i64 i = (i64)y * stride + x;
    out[i] = a[i] + b[i];
}
TESSERA_EXPORT(mat_add_f32)
