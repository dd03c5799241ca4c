package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.WindowManager;
import ij.macro.Interpreter;
import ij.process.ByteProcessor;
import ij.process.ColorProcessor;
import ij.process.ImageProcessor;
import ij.process.ShortProcessor;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

/**
 * Local Variance..., Contrast Enhancement... and Glare Removal... through the menu, against
 * the Rust CLI ({@code tessera variance / contrast / glare}) on the same input: the same
 * library on the same pixels, so the same bits (float outputs included).
 */
public class LocalStatsPluginTest extends ConesFixture {
    @Before
    public void batch() {
        Interpreter.batchMode = true;
        Tessera.clearLastError();
    }

    @After
    public void noBatch() {
        Interpreter.batchMode = false;
    }

    /** Runs a command that makes new images; returns them, oldest first. */
    private static ImagePlus[] run(ImageProcessor ip, String cmd, String opts, int expectNew) {
        int before = WindowManager.getImageCount();
        IJ.run(new ImagePlus("in", ip.duplicate()), cmd, opts);
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        assertEquals(before + expectNew, WindowManager.getImageCount());
        ImagePlus[] r = new ImagePlus[expectNew];
        int[] ids = WindowManager.getIDList();
        for (int i = 0; i < expectNew; i++) r[i] = WindowManager.getImage(ids[before + i]);
        return r;
    }

    private static ImageProcessor inPlace(ImageProcessor ip, String cmd, String opts) {
        ImagePlus imp = new ImagePlus("in", ip.duplicate());
        IJ.run(imp, cmd, opts);
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        return imp.getProcessor();
    }

    private static ShortProcessor gray16() {
        return gray16(200, 193);
    }

    @Test
    public void variance8RecursiveBoxSameAsCli() throws Exception {
        ByteProcessor in = cones.convertToByteProcessor(false);
        ImagePlus v = run(in, "Local Variance...", "method=recursive kernel=box radius=15 border=reflect-101 value=0 backend=cpu", 1)[0];
        assertEquals(ImagePlus.GRAY32, v.getType());
        ImageProcessor cli = Cli.run(in, "variance", "--method", "recursive", "--kernel", "box", "-r", "15", "--border", "reflect101", "--backend", "cpu");
        assertArrayEquals((float[]) cli.getPixels(), (float[]) v.getProcessor().getPixels(), 0f);
    }

    @Test
    public void variance16UsualTentSameAsCli() throws Exception {
        ShortProcessor in = gray16();
        ImagePlus v = run(in, "Local Variance...", "method=usual kernel=tent radius=7 border=replicate value=0 backend=cpu", 1)[0];
        ImageProcessor cli = Cli.run(in, "variance", "--method", "usual", "--kernel", "tent", "-r", "7", "--border", "replicate", "--backend", "cpu");
        assertArrayEquals((float[]) cli.getPixels(), (float[]) v.getProcessor().getPixels(), 0f);
    }

    @Test
    public void varianceOfRgbIsTheLumaVarianceLikeTheCli() throws Exception {
        // The CLI reads RGB in true channel order; the plugin must reorder ImageJ's ints.
        ImagePlus v = run(cones, "Local Variance...", "method=recursive kernel=tent radius=7 border=reflect-101 value=0 backend=cpu", 1)[0];
        ImageProcessor cli = Cli.run(cones, "variance", "--method", "recursive", "--kernel", "tent", "-r", "7", "--backend", "cpu");
        assertArrayEquals((float[]) cli.getPixels(), (float[]) v.getProcessor().getPixels(), 0f);
    }

    @Test
    public void varianceOfAStackKeepsSlicesAndCalibration() {
        ImageStack st = new ImageStack(cones.getWidth(), cones.getHeight());
        ByteProcessor g = cones.convertToByteProcessor(false);
        st.addSlice("a", g);
        ByteProcessor g2 = (ByteProcessor) g.duplicate();
        g2.invert();
        st.addSlice("b", g2);
        ImagePlus imp = new ImagePlus("st", st);
        imp.getCalibration().pixelWidth = 2;
        imp.getCalibration().setUnit("mm");
        int before = WindowManager.getImageCount();
        IJ.run(imp, "Local Variance...", "method=recursive kernel=box radius=3 border=reflect-101 value=0 backend=cpu stack");
        assertNull(Tessera.lastError());
        ImagePlus v = WindowManager.getImage(WindowManager.getIDList()[before]);
        assertEquals(2, v.getStackSize());
        assertEquals(2, v.getCalibration().pixelWidth, 0);
        assertEquals("mm", v.getCalibration().getUnit());
        // Inverting an 8-bit image keeps its local variance exactly.
        assertArrayEquals((float[]) v.getStack().getPixels(1), (float[]) v.getStack().getPixels(2), 0f);
    }

    @Test
    public void badVarianceParametersAreImageJErrors() {
        for (String opts : new String[] {
                "method=recursive kernel=tent radius=6 border=reflect-101 value=0 backend=cpu",
                "method=pairwise kernel=box radius=5000 border=reflect-101 value=0 backend=cpu",
                "method=fast kernel=box radius=7 border=reflect-101 value=0 backend=cpu"}) {
            Tessera.clearLastError();
            try {
                IJ.run(new ImagePlus("in", cones.convertToByteProcessor(false)), "Local Variance...", opts);
            } catch (RuntimeException e) {
                assertThat(e.getMessage(), containsString("Macro canceled"));
            }
            assertNotNull("IJ.error expected for " + opts, Tessera.lastError());
        }
    }

    @Test
    public void contrast8AndRgbSameAsCli() throws Exception {
        ByteProcessor in = cones.convertToByteProcessor(false);
        String opts = "radii=7,31 alpha=1 gain=3 minimum=1 noise=0.1 backend=cpu";
        ImageProcessor a = inPlace(in, "Contrast Enhancement...", opts);
        ImageProcessor b = Cli.run(in, "contrast", "--radii", "7,31", "--alpha", "1", "--gain-max", "3", "--gain-min", "1", "--noise", "0.1", "--backend", "cpu");
        assertArrayEquals((byte[]) b.getPixels(), (byte[]) a.getPixels());
        assertFalse("the image changed", java.util.Arrays.equals((byte[]) in.getPixels(), (byte[]) a.getPixels()));
        ImageProcessor ar = inPlace(cones, "Contrast Enhancement...", opts);
        ImageProcessor br = Cli.run(cones, "contrast", "--radii", "7,31", "--alpha", "1", "--gain-max", "3", "--gain-min", "1", "--noise", "0.1", "--backend", "cpu");
        int[] pa = (int[]) ar.getPixels(), pb = (int[]) br.getPixels();
        for (int i = 0; i < pa.length; i++) assertEquals("pixel " + i, pb[i] & 0xffffff, pa[i] & 0xffffff);
    }

    @Test
    public void contrastWithBadRadiiIsAnImageJError() {
        ImagePlus imp = new ImagePlus("in", cones.convertToByteProcessor(false));
        byte[] before = ((byte[]) imp.getProcessor().getPixels()).clone();
        try {
            IJ.run(imp, "Contrast Enhancement...", "radii=8 alpha=1 gain=3 minimum=1 noise=0.1 backend=cpu");
        } catch (RuntimeException e) {
            assertThat(e.getMessage(), containsString("Macro canceled"));
        }
        assertNotNull(Tessera.lastError());
        assertArrayEquals(before, (byte[]) imp.getProcessor().getPixels());
    }

    @Test
    public void glareOnRgbSameAsCli() throws Exception {
        // A photograph with added specular spots: small white discs.
        ColorProcessor in = (ColorProcessor) cones.duplicate();
        in.setColor(java.awt.Color.WHITE);
        for (int k = 0; k < 6; k++) in.fillOval(40 + 60 * k, 60 + 37 * k % 250, 6, 5);
        String opts = "mode=adaptive radii=5,15,45 k=3 brightness=0.8 contrast=0.08 saturation=0.35 minimum=2 maximum=2000 grow=1 fill=100 backend=cpu";
        ImagePlus[] out = run(in, "Glare Removal...", opts, 2);
        assertEquals(ImagePlus.GRAY8, out[0].getType());
        assertEquals(ImagePlus.COLOR_RGB, out[1].getType());
        ImageProcessor[] mask = new ImageProcessor[1];
        ImageProcessor corr = Cli.runWithMask(in, mask, "glare", "--mode", "adaptive", "--radii", "5,15,45", "--k-sigma", "3",
                "--min-area", "2", "--max-area", "2000", "--grow", "1", "--fill-iterations", "100", "--backend", "cpu");
        assertArrayEquals((byte[]) mask[0].getPixels(), (byte[]) out[0].getProcessor().getPixels());
        int masked = 0;
        for (byte b : (byte[]) out[0].getProcessor().getPixels()) if (b != 0) masked++;
        assertTrue("the white spots are found: " + masked + " pixels", masked >= 6 * 20);
        int[] pa = (int[]) out[1].getProcessor().getPixels(), pb = (int[]) corr.getPixels();
        for (int i = 0; i < pa.length; i++) assertEquals("pixel " + i, pb[i] & 0xffffff, pa[i] & 0xffffff);
    }

    @Test
    public void glareOn8BitSameAsCli() throws Exception {
        ByteProcessor in = cones.convertToByteProcessor(false);
        in.setValue(255);
        for (int k = 0; k < 5; k++) in.fillOval(50 + 70 * k, 80 + 41 * k % 200, 5, 5);
        ImagePlus[] out = run(in, "Glare Removal...", "mode=adaptive radii=5,15,45 k=3 brightness=0.8 contrast=0.08 saturation=0.35 minimum=2 maximum=2000 grow=1 fill=100 backend=cpu", 2);
        ImageProcessor[] mask = new ImageProcessor[1];
        ImageProcessor corr = Cli.runWithMask(in, mask, "glare", "--backend", "cpu");
        assertArrayEquals((byte[]) mask[0].getPixels(), (byte[]) out[0].getProcessor().getPixels());
        assertArrayEquals((byte[]) corr.getPixels(), (byte[]) out[1].getProcessor().getPixels());
    }
}
