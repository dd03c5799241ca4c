// The consensus sets of pairs' similarity hypotheses (the core's `ConsensusCount`,
// stitch/similarity.rs), every pair's of a launch at once: for each hypothesis (c, s, x,
// y), the points of its pair whose moving point it takes within the pair's `tol`
// (Chebyshev) of their reference point, counted, and their weights summed from 0 in point
// order. A thread per hypothesis, the threads of a pair reading the same point at once.
// Each residual x + c u - s v - r_x, y + s u + c v - r_y is evaluated in that order with
// every product and sum rounded on its own (never fused), so every count and score is the
// core's, and the host's choice among them the core's too.
#include "common.cuh"

// tasks, per pair: where its points start in `data`, their count n, tol, and its first
// hypothesis; `pairs` of them. hypotheses: `count` records (c, s, x, y), each pair's in
// turn. data, per pair: its n points (moving x, y, reference x, y), then their n weights.
// out, per hypothesis: the count, the score.
extern "C" __global__ void consensus_sets(const double* tasks, int pairs, const double* hypotheses, const double* data, int count, double* out) {
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count) return;
    // The hypothesis's pair: the last whose first hypothesis is at most k (a pair without
    // hypotheses starts where the next does).
    int lo = 0, hi = pairs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (tasks[4 * (i64)mid + 3] <= k) lo = mid; else hi = mid - 1;
    }
    const double* h = hypotheses + 4 * (i64)k;
    double c = h[0], s = h[1], x = h[2], y = h[3];
    const double* task = tasks + 4 * (i64)lo;
    const double* points = data + (i64)task[0];
    int n = (int)task[1];
    double tol = task[2];
    const double* weights = points + 4 * (i64)n;
    int taken = 0;
    double score = 0.0;
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
