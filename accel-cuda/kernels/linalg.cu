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

// out = a * b (a: k columns x m rows, b: n columns x k rows, out: n x m), f32 with fused
// multiply-adds. Each block computes a 64 x 64 tile of out with 16 x 16 threads, each
// thread a 4 x 4 register block; the depth runs in steps of 16 through shared-memory tiles
// of a (64 rows x 16) and b (16 x 64 columns), loaded coalesced, zero past the edges.
#define MM_TILE 64
#define MM_DEPTH 16
extern "C" __global__ __launch_bounds__(256) void mat_mul_f32(const float* a, const float* b, float* out, int m, int n, int k) {
    __shared__ float as[MM_DEPTH][MM_TILE + 1];  // as[p][i]: a(row0 + i, p0 + p); +1 against bank conflicts
    __shared__ float bs[MM_DEPTH][MM_TILE];      // bs[p][j]: b(p0 + p, col0 + j)
    int tx = threadIdx.x, ty = threadIdx.y;      // 16 x 16
    int t = ty * 16 + tx;
    int row0 = blockIdx.y * MM_TILE, col0 = blockIdx.x * MM_TILE;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (int p0 = 0; p0 < k; p0 += MM_DEPTH) {
        // 1024 elements of each tile, four per thread.
        for (int e = t; e < MM_TILE * MM_DEPTH; e += 256) {
            int ai = e / MM_DEPTH, ap = e % MM_DEPTH;  // a: consecutive threads along its row
            int r = row0 + ai, c = p0 + ap;
            as[ap][ai] = (r < m && c < k) ? a[(i64)r * k + c] : 0.0f;
            int bp = e / MM_TILE, bj = e % MM_TILE;    // b: consecutive threads along its row
            int br = p0 + bp, bc = col0 + bj;
            bs[bp][bj] = (br < k && bc < n) ? b[(i64)br * n + bc] : 0.0f;
        }
        __syncthreads();
        for (int p = 0; p < MM_DEPTH; ++p) {
            float av[4], bv[4];
            for (int i = 0; i < 4; ++i) av[i] = as[p][ty + 16 * i];
            for (int j = 0; j < 4; ++j) bv[j] = bs[p][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
    // Thread (tx, ty) holds rows ty + 16 i and columns tx + 16 j: a warp's stores are
    // 16 consecutive floats of two rows.
    for (int i = 0; i < 4; ++i) {
        int r = row0 + ty + 16 * i;
        if (r >= m) continue;
        for (int j = 0; j < 4; ++j) {
            int c = col0 + tx + 16 * j;
            if (c < n) out[(i64)r * n + c] = acc[i][j];
        }
    }
}
TESSERA_EXPORT(mat_mul_f32)
