// The consensus sets of a pair's similarity hypotheses (stitch/similarity.rs in the core,
// `ConsensusSets`): for each hypothesis (c, s, x, y), the points whose moving point it
// takes within `tol` (Chebyshev) of their reference point, counted, and their weights
// summed from `start` in point order. A thread per hypothesis, every thread reading the
// same point at once. Each residual x + c u - s v - r_x, y + s u + c v - r_y is evaluated
// in that order with every product and sum rounded on its own (never fused), so every
// count and score is the core's, and the host's choice among them the core's too.
#include "common.cuh"

// data: the n points (moving x, y, reference x, y), then their n weights, then the
// `count` hypotheses (c, s, x, y). out, per hypothesis: the count, the score.
extern "C" __global__ void consensus_sets(const double* data, int n, int count, double tol, double start, double* out) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) return;
    const double* points = data;
    const double* weights = data + 4 * (i64)n;
    const double* h = data + 5 * (i64)n + 4 * (i64)k;
    double c = h[0], s = h[1], x = h[2], y = h[3];
    int taken = 0;
    double score = start;
    for (int j = 0; j < n; ++j) {
        const double* p = points + 4 * (i64)j;
        double u = p[0], v = p[1];
        double ex = __dadd_rn(__dadd_rn(__dadd_rn(x, __dmul_rn(c, u)), -__dmul_rn(s, v)), -p[2]);
        double ey = __dadd_rn(__dadd_rn(__dadd_rn(y, __dmul_rn(s, u)), __dmul_rn(c, v)), -p[3]);
        if (fabs(ex) <= tol && fabs(ey) <= tol) {
            ++taken;
            score = __dadd_rn(score, weights[j]);
        }
    }
    out[2 * (i64)k] = taken;
    out[2 * (i64)k + 1] = score;
}
TESSERA_EXPORT(consensus_sets)
