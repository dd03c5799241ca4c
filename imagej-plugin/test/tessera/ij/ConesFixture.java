package tessera.ij;

import ij.process.ByteProcessor;
import ij.process.ColorProcessor;
import ij.process.ShortProcessor;
import org.junit.BeforeClass;

/**
 * What the test classes on the Middlebury "cones" photograph share: ImageJ set up headless
 * ({@link IjHeadless}) and the photograph (RGB, {@code stereo/cones/im2.png}) loaded once
 * per test class.
 */
abstract class ConesFixture {
    static ColorProcessor cones;

    @BeforeClass
    public static void loadCones() throws Exception {
        IjHeadless.setUp();
        cones = (ColorProcessor) IjHeadless.open("stereo/cones/im2.png").getProcessor();
    }

    /** A 16-bit image from the cones' 8-bit gray: {@code gray * scale + i % period} at pixel
     *  index {@code i}, so that it uses more than 8 bits. */
    static ShortProcessor gray16(int scale, int period) {
        ByteProcessor b = cones.convertToByteProcessor(false);
        short[] p = new short[b.getPixelCount()];
        for (int i = 0; i < p.length; i++) p[i] = (short) (b.get(i) * scale + i % period);
        return new ShortProcessor(b.getWidth(), b.getHeight(), p, null);
    }
}
