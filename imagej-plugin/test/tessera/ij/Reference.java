package tessera.ij;

/** Straightforward float64 references the native results are checked against. */
final class Reference {
    /** Border codes of the references (the plugin speaks border names). */
    static final int BORDER_REFLECT101 = 0, BORDER_REPLICATE = 1;

    private Reference() {}

    /** Source index of {@code i} in a row of {@code n} under a border code; -1 = outside. */
    static int index(int i, int n, int border) {
        if (i >= 0 && i < n) return i;
        switch (border) {
            case BORDER_REFLECT101:
                if (n == 1) return 0;
                int period = 2 * (n - 1);
                int m = Math.floorMod(i, period);
                return m < n ? m : period - m;
            case BORDER_REPLICATE:
                return i < 0 ? 0 : n - 1;
            default:
                return -1;
        }
    }

    /** Window sum and in-image count at (x, y) of a {@code kw x kh} window (anchor kw/2, kh/2). */
    private static double[] window(double[] v, int w, int h, int x, int y, int kw, int kh, int border) {
        double s = 0;
        int n = 0;
        for (int j = 0; j < kh; j++) {
            int yy = index(y + j - kh / 2, h, border);
            for (int i = 0; i < kw; i++) {
                int xx = index(x + i - kw / 2, w, border);
                if (xx >= 0 && yy >= 0) {
                    s += v[yy * w + xx];
                    n++;
                }
            }
        }
        return new double[] {s, n};
    }

    /** Mean filter of float pixels (reflect-101 or replicate). */
    static float[] mean(float[] p, int w, int h, int kw, int kh, int border) {
        double[] v = new double[p.length];
        for (int i = 0; i < v.length; i++) v[i] = p[i];
        float[] out = new float[w * h];
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) out[y * w + x] = (float) (window(v, w, h, x, y, kw, kh, border)[0] / (kw * kh));
        return out;
    }

    /** Mean filter of unsigned integer pixels: exact sum, rounded half up. */
    static long[] meanInt(long[] p, int w, int h, int kw, int kh, int border) {
        double[] v = new double[p.length];
        for (int i = 0; i < v.length; i++) v[i] = p[i];
        long[] out = new long[w * h];
        long area = (long) kw * kh;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                long s = (long) window(v, w, h, x, y, kw, kh, border)[0];
                out[y * w + x] = (2 * s + area) / (2 * area);
            }
        return out;
    }

    static long[] unsigned(byte[] p) {
        long[] r = new long[p.length];
        for (int i = 0; i < p.length; i++) r[i] = p[i] & 0xff;
        return r;
    }

    static long[] unsigned(short[] p) {
        long[] r = new long[p.length];
        for (int i = 0; i < p.length; i++) r[i] = p[i] & 0xffff;
        return r;
    }

    /** One 8-bit channel (shift 16 red, 8 green, 0 blue) of ImageJ RGB ints. */
    static long[] channel(int[] p, int shift) {
        long[] r = new long[p.length];
        for (int i = 0; i < p.length; i++) r[i] = (p[i] >> shift) & 0xff;
        return r;
    }
}
