package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.WindowManager;
import ij.macro.Interpreter;
import ij.measure.ResultsTable;
import ij.process.ByteProcessor;
import ij.process.ImageProcessor;
import org.junit.AfterClass;
import org.junit.Before;
import org.junit.BeforeClass;
import org.junit.Test;

import java.io.File;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

/**
 * The similarity motion model through the plugin and the bridge: a sweep cut from a real
 * photograph (assets/photos/astronaut.png) along a known path, frame i turned i degrees
 * about its centre (resampled bilinearly here), so every frame's true pose is known. With
 * {@code motion=similarity} the Panorama table's angles are the truth within 0.15 degrees;
 * with {@code motion=translation} there is no turn to report.
 */
public class TurnedPanoramaTest {
    private static final String CMD = "Panorama (NCC log search)...";
    static final int N = 6, FW = 200, FH = 160;
    /** The turn from one frame to the next, degrees. */
    static final double STEP = 1.0;
    private static ImageProcessor photo;

    @BeforeClass
    public static void setUp() throws Exception {
        IjHeadless.setUp();
        File f = new File(System.getProperty("tessera.assets", "../assets"), "photos/astronaut.png");
        ImagePlus imp = IJ.openImage(f.getPath());
        assertNotNull("ImageJ could not open " + f, imp);
        photo = imp.getProcessor().convertToFloatProcessor();
        Interpreter.batchMode = true; // shown images are kept for WindowManager, headless
    }

    @AfterClass
    public static void tearDown() {
        Interpreter.batchMode = false;
    }

    @Before
    public void clear() {
        Tessera.clearLastError();
    }

    /** Frame i's pose in the photograph {tx, ty, angle in radians}: its pixel (u, v) shows
     *  the photograph at (tx, ty) + R(angle) (u, v), R(a) = [[cos a, -sin a], [sin a, cos a]];
     *  its centre moves (10, 6) pixels per frame. */
    static double[] pose(int i) {
        double a = Math.toRadians(i * STEP), c = Math.cos(a), s = Math.sin(a);
        double cx = 170 + 10 * i, cy = 180 + 6 * i, hx = (FW - 1) / 2.0, hy = (FH - 1) / 2.0;
        return new double[] {cx - (c * hx - s * hy), cy - (s * hx + c * hy), a};
    }

    /** The photograph at (x, y), bilinear between the four pixels around it. */
    static double bilinear(double x, double y) {
        int x0 = (int) Math.floor(x), y0 = (int) Math.floor(y);
        double fx = x - x0, fy = y - y0;
        double top = (1 - fx) * photo.getf(x0, y0) + fx * photo.getf(x0 + 1, y0);
        double bottom = (1 - fx) * photo.getf(x0, y0 + 1) + fx * photo.getf(x0 + 1, y0 + 1);
        return (1 - fy) * top + fy * bottom;
    }

    /** Frame i, 8-bit, rounded. */
    static ByteProcessor frame(int i) {
        double[] p = pose(i);
        double c = Math.cos(p[2]), s = Math.sin(p[2]);
        ByteProcessor out = new ByteProcessor(FW, FH);
        for (int v = 0; v < FH; v++)
            for (int u = 0; u < FW; u++)
                out.set(u, v, (int) Math.round(bilinear(p[0] + c * u - s * v, p[1] + s * u + c * v)));
        return out;
    }

    static ImagePlus sweep(String title) {
        ImageStack st = new ImageStack(FW, FH);
        for (int i = 0; i < N; i++) st.addSlice("turn" + i, frame(i));
        return new ImagePlus(title, st);
    }

    /** Frame i's true pose in frame 0's coordinates {x, y, degrees}: frame 0 is not turned,
     *  so it is frame i's pose in the photograph less frame 0's corner. */
    static double[] truth(int i) {
        double[] p = pose(i), p0 = pose(0);
        return new double[] {p[0] - p0[0], p[1] - p0[1], i * STEP};
    }

    private static String options(String motion) {
        return "rsz=25 cthresh=0.85 npts=6 radius=32 search=log motion=" + motion
                + " blend=overwrite keyframe=0.25 minimum=4 subpixel backend=cpu";
    }

    private static ResultsTable run(ImagePlus seq, String opts) {
        int before = WindowManager.getImageCount();
        IJ.run(seq, CMD, opts);
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        assertEquals("one new image", before + 1, WindowManager.getImageCount());
        ImagePlus pano = WindowManager.getImage(WindowManager.getIDList()[before]);
        ResultsTable rt = (ResultsTable) pano.getProperty("TesseraFrames");
        assertNotNull("the frame table is attached to the panorama", rt);
        assertEquals(N, rt.size());
        return rt;
    }

    @Test
    public void similarityFindsEveryFramesTurn() {
        ResultsTable rt = run(sweep("turned"), options("similarity"));
        for (int i = 0; i < N; i++) {
            double[] t = truth(i);
            String f = "frame " + (i + 1);
            assertEquals(f, "ok", rt.getStringValue("Status", i));
            assertEquals("angle of " + f, t[2], rt.getValue("angle", i), 0.15);
            assertEquals("x of " + f, t[0], rt.getValue("x", i), 0.5);
            assertEquals("y of " + f, t[1], rt.getValue("y", i), 0.5);
        }
    }

    @Test
    public void translationReportsNoTurn() {
        ResultsTable rt = run(sweep("shifted"), options("translation"));
        int ok = 0;
        for (int i = 0; i < N; i++) {
            if (!"ok".equals(rt.getStringValue("Status", i))) continue;
            assertEquals("angle of frame " + (i + 1), 0.0, rt.getValue("angle", i), 0.0);
            ok++;
        }
        assertEquals("a turn of a degree a frame still registers as shifts", N, ok);
    }

    @Test
    public void anUnknownMotionIsAnImageJError() {
        Interpreter.batchMode = false; // in a batch macro ImageJ turns IJ.error into "Macro canceled"
        try {
            IJ.run(sweep("bad"), CMD, options("affine"));
        } finally {
            Interpreter.batchMode = true;
        }
        assertNotNull("an IJ.error was expected", Tessera.lastError());
        assertThat(Tessera.lastError(), containsString("not a valid choice"));
    }

    @Test
    public void registerPairCarriesTheAngleAndScale() {
        byte[] a = (byte[]) frame(0).getPixels(), b = (byte[]) frame(1).getPixels();
        double[] t = truth(1);
        PairResult sim = Native.registerPair(a, b, FW, FH, 0, 0, "motion=similarity backend=cpu");
        assertTrue(sim.skip, sim.ok);
        assertEquals(t[2], sim.angle, 0.15);
        assertEquals(1.0, sim.scale, 0.0);
        assertEquals(t[0], sim.x, 0.5);
        assertEquals(t[1], sim.y, 0.5);
        PairResult zoom = Native.registerPair(a, b, FW, FH, 0, 0, "motion=similarity fit-scale max-turn=3 backend=cpu");
        assertTrue(zoom.skip, zoom.ok);
        assertEquals(t[2], zoom.angle, 0.15);
        assertEquals(1.0, zoom.scale, 0.01);
        PairResult shift = Native.registerPair(a, b, FW, FH, 0, 0, "motion=translation backend=cpu");
        assertEquals(0.0, shift.angle, 0.0);
        assertEquals(1.0, shift.scale, 0.0);
        try {
            Native.registerPair(a, b, FW, FH, 0, 0, "max-turn=0 backend=cpu");
            throw new AssertionError("max-turn=0 must be refused");
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage(), containsString("max turn"));
        }
    }

    @Test
    public void thePanoramaResamplesTurnedFrames() {
        Object[] frames = new Object[N];
        for (int i = 0; i < N; i++) frames[i] = frame(i).getPixels();
        StitchResult s = Native.stitch(frames, FW, FH, "motion=similarity blend=overwrite backend=cpu", null);
        for (StitchResult.Frame f : s.frames) assertTrue(f.reason, f.ok);
        // Canvas pixel (X, Y) shows frame 0's (X + originX, Y + originY), i.e. the
        // photograph there plus frame 0's corner. Around the last frame's centre (drawn
        // last, turned 5 degrees) the canvas is the photograph, resampled twice.
        double[] p0 = pose(0), pl = pose(N - 1);
        double cx = pl[0] + Math.cos(pl[2]) * FW / 2 - Math.sin(pl[2]) * FH / 2;
        double cy = pl[1] + Math.sin(pl[2]) * FW / 2 + Math.cos(pl[2]) * FH / 2;
        byte[] canvas = (byte[]) s.pixels;
        double err = 0, shifted = 0;
        int n = 0;
        for (int dy = -40; dy <= 40; dy++)
            for (int dx = -40; dx <= 40; dx++) {
                int px = (int) Math.round(cx) + dx, py = (int) Math.round(cy) + dy;
                int X = (int) Math.round(px - p0[0]) - s.originX, Y = (int) Math.round(py - p0[1]) - s.originY;
                double want = bilinear(X + s.originX + p0[0], Y + s.originY + p0[1]);
                int got = canvas[Y * s.width + X] & 0xff;
                err += Math.abs(got - want);
                shifted += Math.abs(got - bilinear(X + s.originX + p0[0] + 2, Y + s.originY + p0[1]));
                n++;
            }
        err /= n;
        shifted /= n;
        assertTrue("mean |canvas - photograph| " + err + " against " + shifted + " two pixels off", err < 1.5 && err < 0.25 * shifted);
    }
}
