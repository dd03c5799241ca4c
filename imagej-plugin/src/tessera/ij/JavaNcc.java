package tessera.ij;

import java.util.Arrays;
import java.util.concurrent.CancellationException;
import java.util.function.BooleanSupplier;

/**
 * The pure-Java NCC matcher, the original plugin's way: the baseline that Benchmark...
 * compares with the native CPU and GPU backends.
 *
 * <p>Images are gray {@code float[]} rows of width {@code w}. A template is the
 * {@code size x size} square at {@code (tx, ty)} of the reference frame; a candidate is the
 * square of the same size whose top-left corner is {@code (tx + dx, ty + dy)} in the current
 * frame. The coefficient is Pearson's correlation of the two squares,
 * <pre>  r = (n S_tw - S_t S_w) / sqrt((n S_tt - S_t^2) (n S_ww - S_w^2))</pre>
 * with all five sums gathered in the one loop over the pixels (the original's first
 * optimisation: the template mean is not a separate pass), in double precision. A flat
 * template or window (zero variance) has no defined correlation; it gets 0, so it never wins
 * against real texture and never passes a threshold such as 0.85.
 */
public final class JavaNcc {
    private JavaNcc() {}

    /** The correlation coefficient of template {@code (tx, ty, size)} of {@code ref} with
     *  the window {@code (x, y, size)} of {@code cur}; both must lie inside their images. */
    public static double coefficient(float[] ref, int refW, int tx, int ty, float[] cur, int curW, int x, int y, int size) {
        double st = 0, sw = 0, stt = 0, sww = 0, stw = 0;
        for (int j = 0; j < size; j++) {
            int a = (ty + j) * refW + tx, b = (y + j) * curW + x;
            for (int i = 0; i < size; i++) {
                double t = ref[a + i], v = cur[b + i];
                st += t;
                sw += v;
                stt += t * t;
                sww += v * v;
                stw += t * v;
            }
        }
        double n = (double) size * size;
        double vt = n * stt - st * st, vw = n * sww - sw * sw;
        if (!(vt > 0) || !(vw > 0)) return 0.0;
        double r = (n * stw - st * sw) / Math.sqrt(vt * vw);
        return Math.max(-1.0, Math.min(1.0, r));
    }

    /** The outcome of one search: the best shift, its coefficient, how many positions were
     *  evaluated (each position once: a cache remembers coefficients already computed). */
    public static final class Match {
        public final int dx, dy;
        public final double ncc;
        public final int evaluations;

        Match(int dx, int dy, double ncc, int evaluations) {
            this.dx = dx;
            this.dy = dy;
            this.ncc = ncc;
            this.evaluations = evaluations;
        }

        @Override
        public String toString() {
            return "(" + dx + ", " + dy + ") ncc " + ncc + " after " + evaluations + " evaluations";
        }
    }

    /** One search problem: where the template is, where the search starts, how far it goes. */
    private static final class Search {
        final float[] ref, cur;
        final int refW, curW, curH, tx, ty, size, px, py, radius;
        final double[] cache;
        int evaluations;

        Search(float[] ref, int refW, float[] cur, int curW, int curH, int tx, int ty, int size, int px, int py, int radius) {
            this.ref = ref;
            this.refW = refW;
            this.cur = cur;
            this.curW = curW;
            this.curH = curH;
            this.tx = tx;
            this.ty = ty;
            this.size = size;
            this.px = px;
            this.py = py;
            this.radius = radius;
            int side = 2 * radius + 1;
            this.cache = new double[side * side];
            Arrays.fill(cache, Double.NaN);
        }

        /** The coefficient at shift (dx, dy), or NaN when that window leaves the frame or the
         *  search radius around the predicted shift. */
        double at(int dx, int dy) {
            int ox = dx - px, oy = dy - py;
            if (Math.abs(ox) > radius || Math.abs(oy) > radius) return Double.NaN;
            int x = tx + dx, y = ty + dy;
            if (x < 0 || y < 0 || x + size > curW || y + size > curH) return Double.NaN;
            int k = (oy + radius) * (2 * radius + 1) + ox + radius;
            double r = cache[k];
            if (Double.isNaN(r)) {
                r = coefficient(ref, refW, tx, ty, cur, curW, x, y, size);
                cache[k] = r;
                evaluations++;
            }
            return r;
        }
    }

    private static void checkArgs(float[] ref, int refW, int refH, float[] cur, int curW, int curH, int tx, int ty, int size, int radius) {
        if (ref == null || cur == null) throw new IllegalArgumentException("frame pixels are null");
        if (refW <= 0 || refH <= 0 || curW <= 0 || curH <= 0) throw new IllegalArgumentException("frame sizes must be > 0");
        if (ref.length < refW * refH || cur.length < curW * curH) throw new IllegalArgumentException("frame pixel arrays are shorter than width x height");
        if (size < 2) throw new IllegalArgumentException("template size must be >= 2, got " + size);
        if (radius < 0) throw new IllegalArgumentException("search radius must be >= 0, got " + radius);
        if (tx < 0 || ty < 0 || tx + size > refW || ty + size > refH)
            throw new IllegalArgumentException("template (" + tx + ", " + ty + ", " + size + ") is outside the reference frame");
    }

    /** The first step of the log search: the smallest power of two {@code s} whose steps
     *  {@code s + s/2 + ... + 1 = 2s - 1} reach the whole radius. */
    public static int firstStep(int radius) {
        int s = 1;
        while (2 * s - 1 < radius) s *= 2;
        return s;
    }

    /**
     * Two-dimensional logarithmic search (video motion estimation): start at the predicted
     * shift {@code (px, py)} with step {@link #firstStep}, evaluate the centre and its 8
     * neighbours at that distance, move to the best, halve the step, stop after step 1.
     * Positions outside the frame or farther than {@code radius} from the prediction are not
     * candidates. Ties keep the current centre, then the first neighbour in row order.
     */
    public static Match logSearch(float[] ref, int refW, int refH, float[] cur, int curW, int curH,
                                  int tx, int ty, int size, int px, int py, int radius) {
        checkArgs(ref, refW, refH, cur, curW, curH, tx, ty, size, radius);
        Search s = new Search(ref, refW, cur, curW, curH, tx, ty, size, px, py, radius);
        int cx = px, cy = py;
        double best = s.at(cx, cy);
        if (Double.isNaN(best)) best = Double.NEGATIVE_INFINITY;
        for (int step = firstStep(radius); step >= 1; step /= 2) {
            int bx = cx, by = cy;
            for (int j = -1; j <= 1; j++) {
                for (int i = -1; i <= 1; i++) {
                    if (i == 0 && j == 0) continue;
                    double r = s.at(cx + i * step, cy + j * step);
                    if (r > best) {
                        best = r;
                        bx = cx + i * step;
                        by = cy + j * step;
                    }
                }
            }
            cx = bx;
            cy = by;
        }
        if (best == Double.NEGATIVE_INFINITY) throw new IllegalArgumentException("no candidate window inside the current frame");
        return new Match(cx, cy, best, s.evaluations);
    }

    /** Every shift within {@code radius} of the prediction: the accuracy baseline. */
    public static Match exhaustiveSearch(float[] ref, int refW, int refH, float[] cur, int curW, int curH,
                                         int tx, int ty, int size, int px, int py, int radius) {
        checkArgs(ref, refW, refH, cur, curW, curH, tx, ty, size, radius);
        Search s = new Search(ref, refW, cur, curW, curH, tx, ty, size, px, py, radius);
        int bx = 0, by = 0;
        double best = Double.NEGATIVE_INFINITY;
        for (int dy = py - radius; dy <= py + radius; dy++) {
            for (int dx = px - radius; dx <= px + radius; dx++) {
                double r = s.at(dx, dy);
                if (r > best) {
                    best = r;
                    bx = dx;
                    by = dy;
                }
            }
        }
        if (best == Double.NEGATIVE_INFINITY) throw new IllegalArgumentException("no candidate window inside the current frame");
        return new Match(bx, by, best, s.evaluations);
    }

    /** The shift of one frame pair, as the Java registration finds it. */
    public static final class PairShift {
        /** Where {@code cur}'s pixel (u, v) sits in {@code ref}: at (u + dx, v + dy). */
        public final double dx, dy;
        /** Mean coefficient of the vectors kept; vectors kept / templates placed. */
        public final double ncc;
        public final int used, placed, evaluations;

        PairShift(double dx, double dy, double ncc, int used, int placed, int evaluations) {
            this.dx = dx;
            this.dy = dy;
            this.ncc = ncc;
            this.used = used;
            this.placed = placed;
            this.evaluations = evaluations;
        }

        public boolean ok() {
            return used > 0;
        }
    }

    /**
     * Registers {@code cur} against {@code ref} as the original plugin did: {@code npts x npts}
     * templates of side {@code rsz} spread evenly over {@code ref} with a margin of
     * {@code radius} (so every search area stays inside), each found in {@code cur} by
     * {@link #logSearch} starting from the predicted shift; vectors with a coefficient below
     * {@code cthresh} are dropped and the median of the rest is the shift. {@code used == 0}
     * when no vector passes.
     *
     * <p>The returned (dx, dy) is the displacement of the content: template at (x, y) in
     * {@code ref} found at (x + d, y + d) in {@code cur}; the frame offset of {@code cur} in
     * {@code ref}'s coordinates is therefore (-dx, -dy).
     */
    public static PairShift registerPair(float[] ref, float[] cur, int w, int h, int rsz, int npts,
                                         double cthresh, int radius, int predX, int predY) {
        if (npts < 1) throw new IllegalArgumentException("NPTS must be >= 1, got " + npts);
        int margin = radius + Math.max(Math.abs(predX), Math.abs(predY));
        int spanX = w - rsz - 2 * margin, spanY = h - rsz - 2 * margin;
        if (spanX < 0 || spanY < 0)
            throw new IllegalArgumentException("frames of " + w + "x" + h + " are too small for templates of " + rsz
                    + " and a search radius of " + radius);
        int[] dxs = new int[npts * npts], dys = new int[npts * npts];
        double nccSum = 0;
        int used = 0, evals = 0;
        for (int j = 0; j < npts; j++) {
            for (int i = 0; i < npts; i++) {
                int tx = margin + (npts == 1 ? spanX / 2 : i * spanX / (npts - 1));
                int ty = margin + (npts == 1 ? spanY / 2 : j * spanY / (npts - 1));
                Match m = logSearch(ref, w, h, cur, w, h, tx, ty, rsz, predX, predY, radius);
                evals += m.evaluations;
                if (m.ncc >= cthresh) {
                    dxs[used] = m.dx;
                    dys[used] = m.dy;
                    nccSum += m.ncc;
                    used++;
                }
            }
        }
        if (used == 0) return new PairShift(0, 0, 0, 0, npts * npts, evals);
        return new PairShift(median(dxs, used), median(dys, used), nccSum / used, used, npts * npts, evals);
    }

    /** Per-frame result of {@link #registerSequence}. */
    public static final class FramePosition {
        /** Position in frame-0 coordinates (frame i's pixel (u, v) shows what frame 0 shows
         *  at (u + x, v + y)); NaN when the frame was skipped. */
        public final double x, y, ncc;
        public final int used, evaluations;

        FramePosition(double x, double y, double ncc, int used, int evaluations) {
            this.x = x;
            this.y = y;
            this.ncc = ncc;
            this.used = used;
            this.evaluations = evaluations;
        }

        public boolean ok() {
            return !Double.isNaN(x);
        }
    }

    /**
     * The original plugin's sequence registration: every frame against the last frame that
     * registered, the search starting from the previous pair's shift; a pair whose vectors
     * all fall below {@code cthresh} is skipped and registration goes on from the last good
     * frame. Frames are gray {@code float[]} of one size.
     */
    public static FramePosition[] registerSequence(float[][] frames, int w, int h, int rsz, int npts, double cthresh, int radius) {
        return registerSequence(frames, w, h, rsz, npts, cthresh, radius, () -> false);
    }

    /**
     * {@link #registerSequence(float[][], int, int, int, int, double, int)}, asking
     * {@code stop} before each frame after the first: when it says true the run ends with
     * {@link CancellationException}.
     */
    public static FramePosition[] registerSequence(float[][] frames, int w, int h, int rsz, int npts, double cthresh, int radius,
                                                   BooleanSupplier stop) {
        if (frames == null || frames.length == 0) throw new IllegalArgumentException("no frames");
        FramePosition[] out = new FramePosition[frames.length];
        out[0] = new FramePosition(0, 0, 1, 0, 0);
        int ref = 0, predX = 0, predY = 0;
        for (int i = 1; i < frames.length; i++) {
            if (stop.getAsBoolean())
                throw new CancellationException("registration cancelled after frame " + i + " of " + frames.length);
            PairShift p = registerPair(frames[ref], frames[i], w, h, rsz, npts, cthresh, radius, predX, predY);
            if (!p.ok()) {
                out[i] = new FramePosition(Double.NaN, Double.NaN, 0, 0, p.evaluations);
                continue;
            }
            // Content moved by (dx, dy): frame i's pixel (u, v) shows the reference at
            // (u - dx, v - dy).
            out[i] = new FramePosition(out[ref].x - p.dx, out[ref].y - p.dy, p.ncc, p.used, p.evaluations);
            predX = (int) Math.round(p.dx);
            predY = (int) Math.round(p.dy);
            ref = i;
        }
        return out;
    }

    static double median(int[] v, int n) {
        int[] s = Arrays.copyOf(v, n);
        Arrays.sort(s);
        return n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    }
}
