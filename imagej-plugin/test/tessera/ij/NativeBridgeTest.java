package tessera.ij;

import org.junit.BeforeClass;
import org.junit.Test;

import java.util.Map;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

/**
 * The JNI boundary itself: library loading, the backend query, and that every kind of bad
 * input becomes a Java exception with the core's message while the JVM keeps running (each
 * test ends by making a good call).
 */
public class NativeBridgeTest {
    private static final String CPU = "cpu";

    @BeforeClass
    public static void load() {
        Native.load();
    }

    /** Options of a {@code kw x kh} mean on the CPU. */
    private static String mean(int kw, int kh) {
        return "width=" + kw + " height=" + kh + " backend=" + CPU;
    }

    /** A good call after a bad one: proves the JVM and the library still work. */
    private static void stillWorks() {
        byte[] src = {10, 20, 30, 40}, dst = new byte[4];
        Native.meanFilter(src, dst, 2, 2, mean(1, 1));
        assertArrayEquals(src, dst);
    }

    @Test
    public void versionNamesTheCrate() {
        assertThat(Native.version(), containsString("tessera-jni"));
    }

    @Test
    public void backendsIncludeCpu() {
        assertTrue(Native.hasBackend("cpu"));
    }

    @Test
    public void cudaWithoutDeviceIsIllegalState() {
        if (Native.hasBackend("cuda")) return; // a GPU machine: covered by the cuda tests
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, "backend=cuda"));
        assertThat(e.getMessage(), containsString("CUDA"));
        stillWorks();
    }

    @Test
    public void autoFallsBackToCpu() {
        byte[] src = {1, 2, 3, 4}, dst = new byte[4];
        Native.meanFilter(src, dst, 2, 2, "width=1 height=1 backend=auto");
        assertArrayEquals(src, dst);
        Native.meanFilter(src, dst, 2, 2, "width=1 height=1"); // no backend = auto
        assertArrayEquals(src, dst);
    }

    @Test
    public void unknownBackendIsIllegalArgument() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, "backend=opencl"));
        assertThat(e.getMessage(), containsString("unknown backend"));
        stillWorks();
    }

    @Test
    public void nullSourceArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(null, new byte[4], 2, 2, mean(3, 3)));
        assertThat(e.getMessage(), containsString("src pixel array is null"));
        stillWorks();
    }

    @Test
    public void nullDestinationArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new float[4], null, 2, 2, mean(3, 3)));
        assertThat(e.getMessage(), containsString("dst pixel array is null"));
        stillWorks();
    }

    @Test
    public void bothArraysNullThroughTheDispatcher() {
        assertThrows(IllegalArgumentException.class, () -> Native.meanFilter(null, null, 2, 2, mean(3, 3)));
        stillWorks();
    }

    @Test
    public void shortSourceArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new short[11], new short[12], 4, 3, mean(3, 3)));
        assertThat(e.getMessage(), containsString("needs 12 elements, got 11"));
        stillWorks();
    }

    @Test
    public void shortDestinationArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new int[12], new int[5], 4, 3, mean(3, 3)));
        assertThat(e.getMessage(), containsString("dst"));
        stillWorks();
    }

    @Test
    public void zeroWidth() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 0, 2, mean(3, 3)));
        assertThat(e.getMessage(), containsString("no pixels"));
        stillWorks();
    }

    @Test
    public void negativeHeight() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, -2, mean(3, 3)));
        assertThat(e.getMessage(), containsString("negative"));
        stillWorks();
    }

    @Test
    public void zeroKernel() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, mean(0, 3)));
        stillWorks();
    }

    @Test
    public void hugeKernel() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, mean(1 << 30, 3)));
        stillWorks();
    }

    @Test
    public void unknownBorderCode() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, mean(3, 3) + " border=wrap"));
        assertThat(e.getMessage(), containsString("border=wrap"));
        stillWorks();
    }

    @Test
    public void fractionalConstantOnIntegerImage() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, mean(3, 3) + " border=constant:0.5"));
        stillWorks();
    }

    @Test
    public void sameArrayForSourceAndDestination() {
        byte[] a = new byte[4];
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(a, a, 2, 2, mean(3, 3)));
        assertThat(e.getMessage(), containsString("different arrays"));
        stillWorks();
    }

    @Test
    public void mixedArrayTypes() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new short[4], 2, 2, mean(3, 3)));
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new double[4], new double[4], 2, 2, mean(3, 3)));
        stillWorks();
    }

    @Test
    public void badSigma() {
        for (String s : new String[] {"0", "-1", "NaN", "inf"}) {
            assertThrows(IllegalArgumentException.class,
                    () -> Native.gaussianBlur(new byte[4], new byte[4], 2, 2, "sigma=" + s + " backend=cpu"));
        }
        stillWorks();
    }

    @Test
    public void rustPanicBecomesIllegalState() {
        IllegalStateException e = assertThrows(IllegalStateException.class, Native::panicCheck);
        assertThat(e.getMessage(), containsString("panic"));
        stillWorks();
        // And again: the boundary holds every time, not once.
        assertThrows(IllegalStateException.class, Native::panicCheck);
        stillWorks();
    }

    @Test
    public void writesOnlyTheDestination() {
        float[] src = new float[6 * 5], dst = new float[6 * 5];
        for (int i = 0; i < src.length; i++) src[i] = i * 0.5f;
        float[] copy = src.clone();
        Native.meanFilter(src, dst, 6, 5, mean(3, 3) + " border=replicate");
        assertArrayEquals(copy, src, 0f);
        assertEquals(Reference.mean(copy, 6, 5, 3, 3, Reference.BORDER_REPLICATE)[7], dst[7], 1e-5);
    }

    @Test
    public void stitchDefaultsComeFromTheNativeSide() {
        Map<String, String> d = Native.defaults("stitch");
        assertEquals("25", d.get("rsz"));
        assertEquals("6", d.get("npts"));
        assertEquals(0.85, Double.parseDouble(d.get("cthresh")), 0);
        assertEquals("overwrite", d.get("blend"));
        assertEquals("auto", d.get("backend"));
        // The registration of a pair lists the same options, without the compositing ones.
        Map<String, String> r = Native.defaults("register");
        assertEquals("25", r.get("rsz"));
        assertFalse(r.containsKey("blend"));
        // Every operation answers, and what it answers is accepted back as it is.
        for (String op : new String[] {"mean", "gauss", "variance", "contrast", "glare", "register", "stitch", "stereo"})
            assertTrue(op, Native.defaults(op).containsKey("backend"));
        byte[] src = {1, 2, 3, 4}, dst = new byte[4];
        Native.meanFilter(src, dst, 2, 2, Options.defaults("mean").set("backend", CPU).toString());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Native.defaults("sharpen"));
        assertThat(e.getMessage(), containsString("sharpen"));
    }

    @Test
    public void unknownOptionKeyIsIllegalArgumentNamingIt() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, mean(3, 3) + " radius=2"));
        assertThat(e.getMessage(), containsString("unknown mean option \"radius\""));
        assertThat(e.getMessage(), containsString("width, height, border, backend"));
        e = assertThrows(IllegalArgumentException.class,
                () -> Native.stitch(new Object[] {new byte[16], new byte[16]}, 4, 4, "rsz=25 nptz=6", null));
        assertThat(e.getMessage(), containsString("\"nptz\""));
        e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new byte[4], 2, 2, "width=three"));
        assertThat(e.getMessage(), containsString("width=three"));
        stillWorks();
    }

    @Test
    public void rgbRoundTripKeepsEveryChannelInPlace() {
        // A 1 x 1 window is the identity: the RGB path (in place, channels swapped and back)
        // must give every byte back, alpha included, for the per-channel filters and for the
        // operations that weigh the channels (converted once, swapped back once in place).
        int w = 7, h = 5;
        int[] src = new int[w * h];
        for (int i = 0; i < src.length; i++) src[i] = 0xff000000 | (i * 37 % 256) << 16 | (i * 91 % 256) << 8 | (i * 13 % 256);
        int[] copy = src.clone(), dst = new int[src.length];
        Native.meanFilter(src, dst, w, h, mean(1, 1));
        assertArrayEquals(copy, dst);
        Native.gaussianBlur(src, dst, w, h, "sigma=0.01 radius=1 backend=cpu");
        assertArrayEquals(copy, dst);
        // Contrast with gain 1 everywhere keeps each pixel; a red-blue mix-up would show.
        int[] c = new int[src.length];
        Native.contrastEnhance(src, c, w, h, "radii=1 alpha=1 gain-max=1 gain-min=1 backend=cpu");
        for (int i = 0; i < src.length; i++) assertEquals("pixel " + i, copy[i] & 0xffffff, c[i] & 0xffffff, 0);
        assertArrayEquals("the source is not touched", copy, src);
    }

    @Test
    public void resultsHaveNamedFields() {
        int w = 96, h = 80;
        byte[] a = new byte[w * h], b = new byte[w * h];
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                a[y * w + x] = (byte) texture(x, y);
                b[y * w + x] = (byte) texture(x + 3, y + 2); // b's (u, v) shows a at (u + 3, v + 2)
            }
        PairResult p = Native.registerPair(a, b, w, h, 0, 0, "rsz=15 npts=3 search-radius=8 subpixel=false backend=cpu");
        assertTrue(p.skip, p.ok);
        assertEquals(3, p.x, 0);
        assertEquals(2, p.y, 0);
        assertEquals(9, p.templates);
        assertTrue(p.vectors > 0 && p.ncc > 0.99 && p.evaluations > 0);
        StitchResult s = Native.stitch(new Object[] {a, b}, w, h, "rsz=15 npts=3 search-radius=8 subpixel=false backend=cpu", null);
        assertEquals(2, s.frames.length);
        assertTrue(s.frames[1].ok);
        assertEquals(3, s.frames[1].x, 0);
        assertEquals(w + 3, s.width);
        assertEquals(h + 2, s.height);
        assertTrue(s.pixels instanceof byte[]);
        float[] disp = new float[w * h];
        StereoResult st = Native.stereoSgm(a, a, disp, w, h, "max-disp=8 backend=cpu");
        assertTrue(st.valid > 0 && st.p1 > 0 && st.p2 >= st.p1);
        assertThat(st.summary, containsString("valid " + st.valid));
        GlareResult g = Native.glare(a, new byte[w * h], new byte[w * h], w, h, "backend=cpu");
        assertEquals(255, g.fullScale, 0);
        assertThat(g.summary, containsString(g.spots + " spots"));
    }

    /** A smooth, textured test pattern. */
    private static int texture(int x, int y) {
        return (int) (128 + 60 * Math.sin(x * 0.31) * Math.cos(y * 0.23) + 50 * Math.sin((x + 2 * y) * 0.17));
    }
}
