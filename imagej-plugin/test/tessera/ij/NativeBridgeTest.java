package tessera.ij;

import org.junit.BeforeClass;
import org.junit.Test;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
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

    /** A good call after a bad one: proves the JVM and the library still work. */
    private static void stillWorks() {
        byte[] src = {10, 20, 30, 40}, dst = new byte[4];
        Native.meanFilter8(src, dst, 2, 2, 1, 1, Native.BORDER_REFLECT101, 0f, CPU);
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
                () -> Native.meanFilter8(new byte[4], new byte[4], 2, 2, 1, 1, 0, 0f, "cuda"));
        assertThat(e.getMessage(), containsString("CUDA"));
        stillWorks();
    }

    @Test
    public void autoFallsBackToCpu() {
        byte[] src = {1, 2, 3, 4}, dst = new byte[4];
        Native.meanFilter8(src, dst, 2, 2, 1, 1, 0, 0f, "auto");
        assertArrayEquals(src, dst);
        Native.meanFilter8(src, dst, 2, 2, 1, 1, 0, 0f, null); // null backend = auto
        assertArrayEquals(src, dst);
    }

    @Test
    public void unknownBackendIsIllegalArgument() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(new byte[4], new byte[4], 2, 2, 1, 1, 0, 0f, "opencl"));
        assertThat(e.getMessage(), containsString("unknown backend"));
        stillWorks();
    }

    @Test
    public void nullSourceArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(null, new byte[4], 2, 2, 3, 3, 0, 0f, CPU));
        assertThat(e.getMessage(), containsString("src pixel array is null"));
        stillWorks();
    }

    @Test
    public void nullDestinationArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter32(new float[4], null, 2, 2, 3, 3, 0, 0f, CPU));
        assertThat(e.getMessage(), containsString("dst pixel array is null"));
        stillWorks();
    }

    @Test
    public void bothArraysNullThroughTheDispatcher() {
        assertThrows(IllegalArgumentException.class, () -> Native.meanFilter(null, null, 2, 2, 3, 3, 0, 0f, CPU));
        stillWorks();
    }

    @Test
    public void shortSourceArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter16(new short[11], new short[12], 4, 3, 3, 3, 0, 0f, CPU));
        assertThat(e.getMessage(), containsString("needs 12 elements, got 11"));
        stillWorks();
    }

    @Test
    public void shortDestinationArray() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilterRgb(new int[12], new int[5], 4, 3, 3, 3, 0, 0f, CPU));
        assertThat(e.getMessage(), containsString("dst"));
        stillWorks();
    }

    @Test
    public void zeroWidth() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(new byte[4], new byte[4], 0, 2, 3, 3, 0, 0f, CPU));
        assertThat(e.getMessage(), containsString("no pixels"));
        stillWorks();
    }

    @Test
    public void negativeHeight() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(new byte[4], new byte[4], 2, -2, 3, 3, 0, 0f, CPU));
        assertThat(e.getMessage(), containsString("negative"));
        stillWorks();
    }

    @Test
    public void zeroKernel() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(new byte[4], new byte[4], 2, 2, 0, 3, 0, 0f, CPU));
        stillWorks();
    }

    @Test
    public void hugeKernel() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(new byte[4], new byte[4], 2, 2, 1 << 30, 3, 0, 0f, CPU));
        stillWorks();
    }

    @Test
    public void unknownBorderCode() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(new byte[4], new byte[4], 2, 2, 3, 3, 9, 0f, CPU));
        assertThat(e.getMessage(), containsString("border"));
        stillWorks();
    }

    @Test
    public void fractionalConstantOnIntegerImage() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(new byte[4], new byte[4], 2, 2, 3, 3, Native.BORDER_CONSTANT, 0.5f, CPU));
        stillWorks();
    }

    @Test
    public void sameArrayForSourceAndDestination() {
        byte[] a = new byte[4];
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter8(a, a, 2, 2, 3, 3, 0, 0f, CPU));
        assertThat(e.getMessage(), containsString("different arrays"));
        stillWorks();
    }

    @Test
    public void mixedArrayTypes() {
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new byte[4], new short[4], 2, 2, 3, 3, 0, 0f, CPU));
        assertThrows(IllegalArgumentException.class,
                () -> Native.meanFilter(new double[4], new double[4], 2, 2, 3, 3, 0, 0f, CPU));
        stillWorks();
    }

    @Test
    public void badSigma() {
        for (double s : new double[] {0, -1, Double.NaN, Double.POSITIVE_INFINITY}) {
            assertThrows(IllegalArgumentException.class,
                    () -> Native.gaussianBlur8(new byte[4], new byte[4], 2, 2, s, -1, 0, 0, 0f, CPU));
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
        Native.meanFilter32(src, dst, 6, 5, 3, 3, Native.BORDER_REPLICATE, 0f, CPU);
        assertArrayEquals(copy, src, 0f);
        assertEquals(Reference.mean(copy, 6, 5, 3, 3, Native.BORDER_REPLICATE)[7], dst[7], 1e-5);
    }
}
