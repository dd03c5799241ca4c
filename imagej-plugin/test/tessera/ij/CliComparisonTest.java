package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.process.ByteProcessor;
import ij.process.FloatProcessor;
import ij.process.ImageProcessor;
import ij.process.ShortProcessor;
import org.junit.Test;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;

/**
 * The plugin's menu commands and the Rust CLI on the same input give the same output:
 * bit-identical for integer images, within the documented float bound for 32-bit.
 */
public class CliComparisonTest extends ConesFixture {
    private static ImageProcessor viaPlugin(ImageProcessor ip, String cmd, String options) {
        Tessera.clearLastError();
        ImagePlus imp = new ImagePlus("in", ip.duplicate());
        IJ.run(imp, cmd, options);
        assertNull(Tessera.lastError());
        return imp.getProcessor();
    }

    private static ShortProcessor gray16() {
        return gray16(257, 97);
    }

    @Test
    public void mean8BitIdentical() throws Exception {
        ByteProcessor in = cones.convertToByteProcessor(false);
        ImageProcessor a = viaPlugin(in, "Mean / Box Filter...", "width=15 height=7 border=reflect-101 value=0 backend=cpu");
        ImageProcessor b = Cli.run(in, "mean", "--width", "15", "--height", "7", "--border", "reflect101", "--backend", "cpu");
        assertArrayEquals((byte[]) b.getPixels(), (byte[]) a.getPixels());
    }

    @Test
    public void mean16BitIdentical() throws Exception {
        ShortProcessor in = gray16();
        ImageProcessor a = viaPlugin(in, "Mean / Box Filter...", "width=9 height=33 border=replicate value=0 backend=cpu");
        ImageProcessor b = Cli.run(in, "mean", "--width", "9", "--height", "33", "--border", "replicate", "--backend", "cpu");
        assertArrayEquals((short[]) b.getPixels(), (short[]) a.getPixels());
    }

    @Test
    public void mean32SameFloats() throws Exception {
        FloatProcessor in = cones.convertToFloatProcessor();
        in.multiply(1 / 7.0);
        ImageProcessor a = viaPlugin(in, "Mean / Box Filter...", "width=25 height=25 border=normalize value=0 backend=cpu");
        ImageProcessor b = Cli.run(in, "mean", "--width", "25", "--height", "25", "--border", "normalize", "--backend", "cpu");
        // Same library, same input floats: the same code path gives the same bits.
        assertArrayEquals((float[]) b.getPixels(), (float[]) a.getPixels(), 0f);
    }

    @Test
    public void meanRgbBitIdentical() throws Exception {
        ImageProcessor a = viaPlugin(cones, "Mean / Box Filter...", "width=5 height=5 border=reflect-101 value=0 backend=cpu");
        ImageProcessor b = Cli.run(cones, "mean", "--size", "5", "--border", "reflect101", "--backend", "cpu");
        int[] pa = (int[]) a.getPixels(), pb = (int[]) b.getPixels();
        assertEquals(pa.length, pb.length);
        for (int i = 0; i < pa.length; i++) assertEquals("pixel " + i, pb[i] & 0xffffff, pa[i] & 0xffffff);
    }

    private static final String GAUSS = "Gaussian Blur (Tessera)...";

    @Test
    public void gauss8And16BitIdentical() throws Exception {
        ByteProcessor in8 = cones.convertToByteProcessor(false);
        ImageProcessor a = viaPlugin(in8, GAUSS, "sigma=2 method=auto border=reflect-101 value=0 backend=cpu");
        ImageProcessor b = Cli.run(in8, "gauss", "-s", "2", "--method", "auto", "--border", "reflect101", "--backend", "cpu");
        assertArrayEquals((byte[]) b.getPixels(), (byte[]) a.getPixels());
        ShortProcessor in16 = gray16();
        a = viaPlugin(in16, GAUSS, "sigma=5 method=IIR border=replicate value=0 backend=cpu");
        b = Cli.run(in16, "gauss", "-s", "5", "--method", "iir", "--border", "replicate", "--backend", "cpu");
        assertArrayEquals((short[]) b.getPixels(), (short[]) a.getPixels());
    }

    @Test
    public void gauss32AndRgbIdentical() throws Exception {
        FloatProcessor in = cones.convertToFloatProcessor();
        ImageProcessor a = viaPlugin(in, GAUSS, "sigma=1.5 method=FIR border=reflect-101 value=0 backend=cpu");
        ImageProcessor b = Cli.run(in, "gauss", "-s", "1.5", "--method", "fir", "--border", "reflect101", "--backend", "cpu");
        assertArrayEquals((float[]) b.getPixels(), (float[]) a.getPixels(), 0f);
        a = viaPlugin(cones, GAUSS, "sigma=3 method=auto border=reflect-101 value=0 backend=cpu");
        b = Cli.run(cones, "gauss", "-s", "3", "--backend", "cpu");
        int[] pa = (int[]) a.getPixels(), pb = (int[]) b.getPixels();
        for (int i = 0; i < pa.length; i++) assertEquals("pixel " + i, pb[i] & 0xffffff, pa[i] & 0xffffff);
    }
}
