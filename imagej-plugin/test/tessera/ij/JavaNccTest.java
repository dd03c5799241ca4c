package tessera.ij;

import ij.process.ColorProcessor;
import ij.process.FloatProcessor;
import org.junit.BeforeClass;
import org.junit.Test;

import java.util.Random;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

/** The pure-Java NCC and log search against a brute-force two-pass NCC. */
public class JavaNccTest {
    private static float[] img;
    private static int w, h;

    @BeforeClass
    public static void setUp() throws Exception {
        IjHeadless.setUp();
        FloatProcessor f = ((ColorProcessor) IjHeadless.open("stereo/teddy/im2.png").getProcessor()).convertToFloatProcessor();
        img = (float[]) f.getPixels();
        w = f.getWidth();
        h = f.getHeight();
    }

    /** Two-pass textbook Pearson correlation. */
    private static double bruteNcc(float[] a, int aw, int tx, int ty, float[] b, int bw, int x, int y, int n) {
        double ma = 0, mb = 0;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < n; i++) {
                ma += a[(ty + j) * aw + tx + i];
                mb += b[(y + j) * bw + x + i];
            }
        ma /= n * n;
        mb /= n * n;
        double sab = 0, saa = 0, sbb = 0;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < n; i++) {
                double da = a[(ty + j) * aw + tx + i] - ma, db = b[(y + j) * bw + x + i] - mb;
                sab += da * db;
                saa += da * da;
                sbb += db * db;
            }
        return (saa == 0 || sbb == 0) ? 0 : sab / Math.sqrt(saa * sbb);
    }

    /** {@code img} shifted so that content at (x, y) moves to (x + dx, y + dy); edges replicated. */
    private static float[] shifted(int dx, int dy) {
        float[] o = new float[w * h];
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int sx = Math.min(w - 1, Math.max(0, x - dx)), sy = Math.min(h - 1, Math.max(0, y - dy));
                o[y * w + x] = img[sy * w + sx];
            }
        return o;
    }

    @Test
    public void coefficientMatchesBruteForceOnRandomPatches() {
        Random r = new Random(7);
        for (int k = 0; k < 200; k++) {
            int n = 2 + r.nextInt(40);
            int tx = r.nextInt(w - n), ty = r.nextInt(h - n), x = r.nextInt(w - n), y = r.nextInt(h - n);
            assertEquals(bruteNcc(img, w, tx, ty, img, w, x, y, n), JavaNcc.coefficient(img, w, tx, ty, img, w, x, y, n), 1e-9);
        }
    }

    @Test
    public void coefficientOfAPatchWithItselfIsOne() {
        assertEquals(1.0, JavaNcc.coefficient(img, w, 100, 80, img, w, 100, 80, 25), 1e-12);
    }

    @Test
    public void flatPatchGivesZeroNotNaN() {
        float[] flat = new float[50 * 50];
        java.util.Arrays.fill(flat, 42f);
        assertEquals(0.0, JavaNcc.coefficient(flat, 50, 0, 0, img, w, 10, 10, 25), 0);
        assertEquals(0.0, JavaNcc.coefficient(img, w, 10, 10, flat, 50, 0, 0, 25), 0);
    }

    @Test
    public void firstStepCoversTheRadius() {
        assertEquals(1, JavaNcc.firstStep(1));
        assertEquals(2, JavaNcc.firstStep(3));
        assertEquals(4, JavaNcc.firstStep(4));
        assertEquals(16, JavaNcc.firstStep(31));
        assertEquals(32, JavaNcc.firstStep(32));
    }

    @Test
    public void logSearchIsAConsistentGreedyDescent() {
        int[][] shifts = {{3, -2}, {-7, 5}, {12, 9}, {-15, -11}, {0, 0}, {20, -3}};
        int levels = Integer.numberOfTrailingZeros(JavaNcc.firstStep(24)) + 1;
        for (int[] s : shifts) {
            float[] cur = shifted(s[0], s[1]);
            for (int ty = 60; ty < h - 90; ty += 60)
                for (int tx = 60; tx < w - 90; tx += 60) {
                    JavaNcc.Match log = JavaNcc.logSearch(img, w, h, cur, w, h, tx, ty, 25, 0, 0, 24);
                    JavaNcc.Match all = JavaNcc.exhaustiveSearch(img, w, h, cur, w, h, tx, ty, 25, 0, 0, 24);
                    // Exhaustive search finds the true shift, with a perfect coefficient.
                    assertEquals(s[0], all.dx);
                    assertEquals(s[1], all.dy);
                    assertEquals(1.0, all.ncc, 1e-9);
                    assertEquals((2 * 24 + 1) * (2 * 24 + 1), all.evaluations);
                    // The log search reports the true coefficient of where it stopped,
                    // never beats the exhaustive optimum, and evaluates each position once:
                    // at most the centre plus 8 per halving.
                    assertEquals(JavaNcc.coefficient(img, w, tx, ty, cur, w, tx + log.dx, ty + log.dy, 25), log.ncc, 0);
                    assertTrue(log.ncc <= all.ncc + 1e-12);
                    assertTrue(log.evaluations <= 1 + 8 * levels);
                    assertTrue(Math.abs(log.dx) <= 24 && Math.abs(log.dy) <= 24);
                }
        }
    }

    @Test
    public void logSearchStopsOnThePeakWhenStartedThere() {
        float[] cur = shifted(6, -4);
        JavaNcc.Match m = JavaNcc.logSearch(img, w, h, cur, w, h, 150, 120, 25, 6, -4, 16);
        assertEquals(6, m.dx);
        assertEquals(-4, m.dy);
        assertEquals(1.0, m.ncc, 1e-9);
    }

    @Test
    public void registerPairRecoversTheShift() {
        // Single log searches can be led astray (a greedy descent on a bumpy surface); the
        // cthresh filter and the median over the 6 x 6 grid must not be.
        for (int[] s : new int[][] {{-9, 4}, {3, -2}, {14, 10}, {0, 0}}) {
            float[] cur = shifted(s[0], s[1]);
            JavaNcc.PairShift p = JavaNcc.registerPair(img, cur, w, h, 25, 6, 0.85, 24, 0, 0);
            assertTrue(p.ok());
            assertEquals("dx for " + s[0], s[0], p.dx, 0);
            assertEquals("dy for " + s[1], s[1], p.dy, 0);
            assertTrue(p.ncc >= 0.85);
        }
    }

    /** Crops of {@code img} at the given offsets: frame i's position is offset i - offset 0. */
    static float[][] cropSequence(int[][] offsets, int fw, int fh) {
        float[][] frames = new float[offsets.length][fw * fh];
        for (int k = 0; k < offsets.length; k++)
            for (int v = 0; v < fh; v++)
                System.arraycopy(img, (offsets[k][1] + v) * w + offsets[k][0], frames[k], v * fw, fw);
        return frames;
    }

    @Test
    public void registerSequenceRecoversCropPositions() {
        int[][] off = {{20, 20}, {27, 24}, {35, 27}, {41, 33}, {50, 36}, {58, 40}, {63, 47}};
        float[][] frames = cropSequence(off, 240, 200);
        JavaNcc.FramePosition[] pos = JavaNcc.registerSequence(frames, 240, 200, 25, 6, 0.85, 16);
        for (int k = 0; k < off.length; k++) {
            assertTrue("frame " + k + " registered", pos[k].ok());
            assertEquals("x of frame " + k, off[k][0] - off[0][0], pos[k].x, 0);
            assertEquals("y of frame " + k, off[k][1] - off[0][1], pos[k].y, 0);
        }
    }

    @Test
    public void registerSequenceSkipsAFlatFrameAndGoesOn() {
        int[][] off = {{20, 20}, {26, 23}, {32, 26}};
        float[][] frames = cropSequence(off, 240, 200);
        float[][] withFlat = {frames[0], new float[240 * 200], frames[1], frames[2]};
        JavaNcc.FramePosition[] pos = JavaNcc.registerSequence(withFlat, 240, 200, 25, 6, 0.85, 16);
        assertTrue(!pos[1].ok());
        assertEquals(6, pos[2].x, 0);
        assertEquals(12, pos[3].x, 0);
        assertEquals(6, pos[3].y, 0);
    }

    @Test
    public void registerSequenceStopsWhenAsked() {
        int[][] off = {{20, 20}, {26, 23}, {32, 26}, {38, 29}};
        float[][] frames = cropSequence(off, 240, 200);
        int[] asked = {0};
        java.util.concurrent.CancellationException e = assertThrows(java.util.concurrent.CancellationException.class,
                () -> JavaNcc.registerSequence(frames, 240, 200, 25, 6, 0.85, 16, () -> ++asked[0] == 2));
        assertEquals("asked before frames 2 and 3 only", 2, asked[0]);
        assertTrue(e.getMessage(), e.getMessage().contains("after frame 2 of 4"));
    }

    @Test
    public void badSearchArguments() {
        assertThrows(IllegalArgumentException.class, () -> JavaNcc.logSearch(null, w, h, img, w, h, 0, 0, 25, 0, 0, 8));
        assertThrows(IllegalArgumentException.class, () -> JavaNcc.logSearch(img, w, h, img, w, h, w - 10, 0, 25, 0, 0, 8));
        assertThrows(IllegalArgumentException.class, () -> JavaNcc.logSearch(img, w, h, img, w, h, 0, 0, 1, 0, 0, 8));
        assertThrows(IllegalArgumentException.class, () -> JavaNcc.logSearch(img, w, h, img, w, h, 0, 0, 25, 0, 0, -1));
        assertThrows(IllegalArgumentException.class, () -> JavaNcc.registerPair(img, img, 40, 40, 25, 6, 0.85, 24, 0, 0));
    }
}
