package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.measure.Calibration;
import ij.process.ByteProcessor;
import ij.process.ColorProcessor;
import ij.process.FloatProcessor;
import ij.process.ImageProcessor;
import ij.process.ShortProcessor;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;

import java.awt.event.KeyEvent;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;

/**
 * Plugins > Tessera > Mean / Box Filter... run as a macro would, {@code IJ.run(imp,
 * "Mean / Box Filter...", options)}, on the Middlebury "cones" photograph in each ImageJ
 * pixel type, checked pixel for pixel against {@link Reference}.
 */
public class MeanFilterPluginTest extends ConesFixture {
    private static final String CMD = "Mean / Box Filter...";
    @Before
    public void clear() {
        Tessera.clearLastError();
    }

    @After
    public void noEscape() {
        IJ.resetEscape();
    }

    private static String opts(int kw, int kh, String border) {
        return "width=" + kw + " height=" + kh + " border=" + border + " value=0 backend=cpu";
    }

    private static ByteProcessor gray8() {
        return cones.convertToByteProcessor(false);
    }

    @Test
    public void gray8MatchesExactReference() {
        ByteProcessor ip = gray8();
        long[] want = Reference.meanInt(Reference.unsigned((byte[]) ip.getPixels()), ip.getWidth(), ip.getHeight(), 15, 9, 0);
        ImagePlus imp = new ImagePlus("cones8", ip);
        IJ.run(imp, CMD, opts(15, 9, "reflect-101"));
        assertNull(Tessera.lastError());
        assertArrayEquals(want, Reference.unsigned((byte[]) imp.getProcessor().getPixels()));
    }

    @Test
    public void gray16MatchesExactReference() {
        ByteProcessor b = gray8();
        short[] p = new short[b.getPixelCount()];
        for (int i = 0; i < p.length; i++) p[i] = (short) (((b.get(i) * 257) + i % 251) & 0xffff);
        ShortProcessor ip = new ShortProcessor(b.getWidth(), b.getHeight(), p, null);
        long[] want = Reference.meanInt(Reference.unsigned(p), ip.getWidth(), ip.getHeight(), 7, 31, Reference.BORDER_REPLICATE);
        ImagePlus imp = new ImagePlus("cones16", ip);
        IJ.run(imp, CMD, opts(7, 31, "replicate"));
        assertNull(Tessera.lastError());
        assertArrayEquals(want, Reference.unsigned((short[]) imp.getProcessor().getPixels()));
    }

    @Test
    public void gray32MatchesFloat64Reference() {
        FloatProcessor ip = gray8().convertToFloatProcessor();
        ip.multiply(1 / 3.7);
        float[] want = Reference.mean((float[]) ip.getPixels(), ip.getWidth(), ip.getHeight(), 21, 21, 0);
        ImagePlus imp = new ImagePlus("cones32", ip);
        IJ.run(imp, CMD, opts(21, 21, "reflect-101"));
        assertNull(Tessera.lastError());
        // f64 window sums rounded once to f32: within one f32 ulp of values <= 70.
        assertArrayEquals(want, (float[]) imp.getProcessor().getPixels(), 1e-5f);
    }

    @Test
    public void rgbIsFilteredPerChannelExactly() {
        ColorProcessor ip = (ColorProcessor) cones.duplicate();
        int[] p = ((int[]) ip.getPixels()).clone();
        int w = ip.getWidth(), h = ip.getHeight();
        ImagePlus imp = new ImagePlus("conesRGB", ip);
        IJ.run(imp, CMD, opts(5, 11, "reflect-101"));
        assertNull(Tessera.lastError());
        int[] out = (int[]) imp.getProcessor().getPixels();
        for (int shift : new int[] {16, 8, 0})
            assertArrayEquals("channel at bit " + shift, Reference.meanInt(Reference.channel(p, shift), w, h, 5, 11, 0),
                    Reference.channel(out, shift));
    }

    @Test
    public void wholeStackWithTheStackKeyword() {
        ImageStack st = new ImageStack(64, 48);
        for (int s = 0; s < 3; s++) {
            ByteProcessor b = new ByteProcessor(64, 48);
            for (int i = 0; i < b.getPixelCount(); i++) b.set(i, (i * 7 + s * 31) % 256);
            st.addSlice("s" + s, b);
        }
        ImagePlus imp = new ImagePlus("stack", st);
        byte[][] before = new byte[3][];
        for (int s = 0; s < 3; s++) before[s] = ((byte[]) st.getPixels(s + 1)).clone();
        IJ.run(imp, CMD, opts(3, 3, "reflect-101") + " stack");
        assertNull(Tessera.lastError());
        for (int s = 0; s < 3; s++) {
            long[] want = Reference.meanInt(Reference.unsigned(before[s]), 64, 48, 3, 3, 0);
            assertArrayEquals("slice " + (s + 1), want, Reference.unsigned((byte[]) imp.getStack().getPixels(s + 1)));
        }
    }

    @Test
    public void withoutStackKeywordOnlyTheCurrentSlice() {
        ImageStack st = new ImageStack(32, 32);
        for (int s = 0; s < 2; s++) {
            FloatProcessor f = new FloatProcessor(32, 32);
            for (int i = 0; i < f.getPixelCount(); i++) f.setf(i, (i * 13 + s) % 17);
            st.addSlice(f);
        }
        ImagePlus imp = new ImagePlus("two", st);
        imp.setSlice(2);
        float[] first = ((float[]) st.getPixels(1)).clone();
        IJ.run(imp, CMD, opts(3, 3, "replicate"));
        assertArrayEquals(first, (float[]) imp.getStack().getPixels(1), 0f);
    }

    @Test
    public void escapeStopsBeforeTheNextSlice() {
        // IJ.run clears the Esc flag when it starts, so drive the filter's slice loop
        // directly, as PlugInFilterRunner does, and press Esc after the first slice.
        MeanFilterPlugin f = new MeanFilterPlugin();
        f.setNPasses(2);
        ByteProcessor a = gray8(), b = gray8();
        byte[] a0 = ((byte[]) a.getPixels()).clone(), b0 = ((byte[]) b.getPixels()).clone();
        f.run(a);
        IJ.setKeyDown(KeyEvent.VK_ESCAPE);
        f.run(b);
        assertFalse("the first slice was filtered", java.util.Arrays.equals(a0, (byte[]) a.getPixels()));
        assertArrayEquals("the slice after Esc is untouched", b0, (byte[]) b.getPixels());
    }

    @Test
    public void calibrationIsKept() {
        ImagePlus imp = new ImagePlus("cal", gray8());
        Calibration cal = imp.getCalibration();
        cal.pixelWidth = 0.25;
        cal.pixelHeight = 0.5;
        cal.setUnit("mm");
        IJ.run(imp, CMD, opts(3, 3, "reflect-101"));
        assertEquals(0.25, imp.getCalibration().pixelWidth, 0);
        assertEquals(0.5, imp.getCalibration().pixelHeight, 0);
        assertEquals("mm", imp.getCalibration().getUnit());
    }

    @Test
    public void snapshotHoldsTheOriginalForUndo() {
        ByteProcessor ip = gray8();
        byte[] orig = ((byte[]) ip.getPixels()).clone();
        ImagePlus imp = new ImagePlus("undo", ip);
        IJ.run(imp, CMD, opts(9, 9, "reflect-101"));
        ImageProcessor after = imp.getProcessor();
        after.reset(); // what Edit > Undo does for a filter
        assertArrayEquals(orig, (byte[]) after.getPixels());
    }

    @Test
    public void cudaWithoutDeviceIsAnImageJErrorAndTheImageIsUnchanged() {
        if (Native.hasBackend("cuda")) return;
        ByteProcessor ip = gray8();
        byte[] orig = ((byte[]) ip.getPixels()).clone();
        ImagePlus imp = new ImagePlus("cuda", ip);
        IJ.run(imp, CMD, "width=3 height=3 border=reflect-101 value=0 backend=cuda");
        assertNotNull(Tessera.lastError());
        assertThat(Tessera.lastError(), containsString("CUDA"));
        assertArrayEquals(orig, (byte[]) imp.getProcessor().getPixels());
    }

    @Test
    public void invalidWindowIsAnImageJError() {
        ImagePlus imp = new ImagePlus("bad", gray8());
        IJ.run(imp, CMD, "width=0 height=3 border=reflect-101 value=0 backend=cpu");
        assertNotNull(Tessera.lastError());
        Tessera.clearLastError();
        IJ.run(imp, CMD, "width=3 height=3 border=mirror value=0 backend=cpu");
        assertThat(Tessera.lastError(), containsString("not a valid choice"));
    }

    @Test
    public void onlyTheSelectionChanges() {
        ByteProcessor ip = gray8();
        byte[] orig = ((byte[]) ip.getPixels()).clone();
        int w = ip.getWidth();
        long[] full = Reference.meanInt(Reference.unsigned(orig), w, ip.getHeight(), 7, 7, 0);
        ImagePlus imp = new ImagePlus("roi", ip);
        imp.setRoi(new java.awt.Rectangle(100, 50, 120, 90));
        IJ.run(imp, CMD, opts(7, 7, "reflect-101"));
        assertNull(Tessera.lastError());
        byte[] out = (byte[]) imp.getProcessor().getPixels();
        for (int y = 0; y < ip.getHeight(); y++)
            for (int x = 0; x < w; x++) {
                boolean inside = x >= 100 && x < 220 && y >= 50 && y < 140;
                long want = inside ? full[y * w + x] : orig[y * w + x] & 0xff;
                assertEquals("(" + x + ", " + y + ")", want, out[y * w + x] & 0xff);
            }
    }
}
