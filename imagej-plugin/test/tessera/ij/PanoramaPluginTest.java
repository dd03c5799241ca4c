package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.WindowManager;
import ij.macro.Interpreter;
import ij.measure.ResultsTable;
import ij.process.ColorProcessor;
import ij.process.ImageProcessor;
import org.junit.AfterClass;
import org.junit.Before;
import org.junit.BeforeClass;
import org.junit.Test;

import java.awt.event.KeyEvent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CancellationException;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

/**
 * Plugins > Tessera > Panorama (NCC log search)... on generated sequences: crops of the
 * Middlebury cones photograph along a known path, so every frame's true position is known
 * and, with integer positions and the overwrite blend, the panorama must reproduce the
 * photograph's pixels exactly.
 */
public class PanoramaPluginTest {
    private static final String CMD = "Panorama (NCC log search)...";
    static final int[][] PATH = {{10, 12}, {18, 15}, {27, 17}, {35, 22}, {44, 24}, {52, 29}, {61, 31}, {69, 36}};
    static final int FW = 220, FH = 180;
    private static ColorProcessor cones;

    @BeforeClass
    public static void setUp() throws Exception {
        IjHeadless.setUp();
        cones = (ColorProcessor) IjHeadless.open("stereo/cones/im2.png").getProcessor();
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

    /** The frames of {@link #PATH}, cut from {@code src}. */
    static ImagePlus sequence(ImageProcessor src, String title) {
        ImageStack st = new ImageStack(FW, FH);
        for (int[] o : PATH) {
            src.setRoi(o[0], o[1], FW, FH);
            st.addSlice("x" + o[0] + "y" + o[1], src.crop());
        }
        src.resetRoi();
        return new ImagePlus(title, st);
    }

    private static String options(String backend) {
        return "rsz=25 cthresh=0.85 npts=6 radius=16 search=log blend=overwrite keyframe=0.25 minimum=4 subpixel backend=" + backend;
    }

    private static ImagePlus run(ImagePlus seq, String opts) {
        int before = WindowManager.getImageCount();
        IJ.run(seq, CMD, opts);
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        assertEquals("one new image", before + 1, WindowManager.getImageCount());
        ImagePlus pano = WindowManager.getImage(WindowManager.getIDList()[before]);
        assertNotNull(pano);
        return pano;
    }

    private static void checkAgainstTruth(ImagePlus pano, ImageProcessor src) {
        ResultsTable rt = (ResultsTable) pano.getProperty("TesseraFrames");
        assertNotNull("the frame table is attached to the panorama", rt);
        assertEquals(PATH.length, rt.size());
        for (int i = 0; i < PATH.length; i++) {
            assertEquals("frame " + (i + 1), "ok", rt.getStringValue("Status", i));
            assertEquals("x of frame " + (i + 1), PATH[i][0] - PATH[0][0], rt.getValue("x", i), 0.05);
            assertEquals("y of frame " + (i + 1), PATH[i][1] - PATH[0][1], rt.getValue("y", i), 0.05);
            if (i > 0) assertTrue(rt.getValue("NCC", i) > 0.99);
        }
        int w = PATH[PATH.length - 1][0] - PATH[0][0] + FW, h = PATH[PATH.length - 1][1] - PATH[0][1] + FH;
        assertEquals(w, pano.getWidth());
        assertEquals(h, pano.getHeight());
        // Overwrite at exact integer positions: every covered canvas pixel is the photograph's.
        ImageProcessor ip = pano.getProcessor();
        int checked = 0;
        for (int[] o : PATH) {
            int x0 = o[0] - PATH[0][0], y0 = o[1] - PATH[0][1];
            for (int v = 0; v < FH; v += 7)
                for (int u = 0; u < FW; u += 7) {
                    assertEquals("canvas (" + (x0 + u) + ", " + (y0 + v) + ")",
                            src.get(o[0] + u, o[1] + v) & 0xffffff, ip.get(x0 + u, y0 + v) & 0xffffff);
                    checked++;
                }
        }
        assertTrue(checked > 1000);
    }

    @Test
    public void rgbSequenceRecoversThePathAndThePixels() {
        ImagePlus pano = run(sequence(cones, "conesRGB"), options("cpu"));
        checkAgainstTruth(pano, cones);
        assertEquals(ImagePlus.COLOR_RGB, pano.getType());
    }

    @Test
    public void gray8SequenceRecoversThePathAndThePixels() {
        ImageProcessor gray = cones.convertToByteProcessor(false);
        ImagePlus pano = run(sequence(gray, "cones8"), options("cpu"));
        checkAgainstTruth(pano, gray);
        assertEquals(ImagePlus.GRAY8, pano.getType());
    }

    @Test
    public void calibrationAndOriginFollowTheStack() {
        ImagePlus seq = sequence(cones.convertToByteProcessor(false), "cal");
        seq.getCalibration().pixelWidth = 0.5;
        seq.getCalibration().pixelHeight = 0.5;
        seq.getCalibration().setUnit("mm");
        ImagePlus pano = run(seq, options("cpu"));
        assertEquals(0.5, pano.getCalibration().pixelWidth, 0);
        assertEquals("mm", pano.getCalibration().getUnit());
        assertEquals(0, pano.getCalibration().xOrigin, 0); // frame 1 is the canvas corner here
    }

    /** Runs a command that must fail with an IJ.error. (Outside batch mode: in a batch
     *  macro ImageJ turns IJ.error into "Macro canceled".) */
    private static void runExpectingError(ImagePlus imp, String opts, String expected) {
        Interpreter.batchMode = false;
        try {
            IJ.run(imp, CMD, opts);
        } finally {
            Interpreter.batchMode = true;
        }
        assertNotNull("an IJ.error was expected", Tessera.lastError());
        assertThat(Tessera.lastError(), containsString(expected));
    }

    @Test
    public void singleSliceIsAnImageJError() {
        int before = WindowManager.getImageCount();
        runExpectingError(new ImagePlus("one", cones.duplicate()), options("cpu"), "at least 2 frames");
        assertEquals(before, WindowManager.getImageCount());
    }

    @Test
    public void cudaWithoutDeviceIsAnImageJError() {
        if (Native.hasBackend("cuda")) return;
        runExpectingError(sequence(cones, "c"), options("cuda"), "CUDA");
    }

    @Test
    public void aFlatFrameIsSkippedWithItsReasonAndTheRestStitched() {
        ImagePlus seq = sequence(cones.convertToByteProcessor(false), "flat");
        seq.getStack().getProcessor(4).setValue(128);
        seq.getStack().getProcessor(4).fill();
        int before = WindowManager.getImageCount();
        IJ.run(seq, CMD, options("cpu"));
        assertNull(Tessera.lastError());
        ImagePlus pano = WindowManager.getImage(WindowManager.getIDList()[before]);
        ResultsTable rt = (ResultsTable) pano.getProperty("TesseraFrames");
        assertEquals("skipped", rt.getStringValue("Status", 3));
        assertTrue(rt.getStringValue("Reason", 3).length() > 0);
        assertEquals("ok", rt.getStringValue("Status", 7));
        assertEquals(PATH[7][0] - PATH[0][0], rt.getValue("x", 7), 0.05);
    }

    @Test
    public void aSweepPastAFeaturelessBandGivesTwoIslandsAndTheirTable() {
        // The photograph enlarged 2x with a flat band 240 px wide a third of the way along;
        // frames every 24 px across it, none coming back.
        ImageProcessor big = cones.convertToByteProcessor(false).resize(900, 750);
        big.setValue(128);
        big.setRoi(300, 0, 240, 750);
        big.fill();
        big.resetRoi();
        ImageStack st = new ImageStack(FW, FH);
        int n = (900 - FW - 5) / 24 + 1;
        for (int k = 0; k < n; k++) {
            big.setRoi(1 + 24 * k, 280, FW, FH);
            st.addSlice("x" + (1 + 24 * k), big.crop());
        }
        big.resetRoi();
        ImagePlus pano = run(new ImagePlus("band", st), options("cpu"));
        ResultsTable islands = (ResultsTable) pano.getProperty("TesseraIslands");
        assertEquals("two islands", 2, islands.size());
        int apart = islands.getStringValue("In panorama", 0).equals("no") ? 0 : 1;
        assertEquals("yes", islands.getStringValue("In panorama", 1 - apart));
        int first = (int) islands.getValue("First frame", apart);
        ResultsTable rt = (ResultsTable) pano.getProperty("TesseraFrames");
        int onIsland = 0;
        for (int i = 0; i < n; i++) {
            if (!rt.getStringValue("Status", i).equals("island")) continue;
            onIsland++;
            assertEquals(first, (int) rt.getValue("Island", i));
            assertEquals("x of frame " + (i + 1) + " on its island", 24.0 * (i + 1 - first), rt.getValue("x", i), 1.0);
            assertEquals(0.0, rt.getValue("y", i), 1.0);
        }
        assertEquals((int) islands.getValue("Frames", apart), onIsland);
        assertTrue(onIsland >= 3);
    }

    @Test
    public void badParametersAreImageJErrors() {
        runExpectingError(sequence(cones, "bad"), "rsz=2 cthresh=0.85 npts=6 radius=16 blend=overwrite keyframe=0.25 minimum=4 backend=cpu", "rsz");
        Tessera.clearLastError();
        runExpectingError(sequence(cones, "bad"), "rsz=25 cthresh=0.85 npts=6 radius=16 blend=mosaic keyframe=0.25 minimum=4 backend=cpu", "not a valid choice");
    }

    @Test
    public void nativeStitchRejectsNullFramesAndMixedTypes() {
        Object[] mixed = {new byte[FW * FH], new short[FW * FH]};
        try {
            Native.stitch(mixed, FW, FH, OPTIONS, null);
            throw new AssertionError("mixed frame types must be refused");
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage(), containsString("frame 2"));
        }
        try {
            Native.stitch(new Object[] {new byte[FW * FH], null}, FW, FH, OPTIONS, null);
            throw new AssertionError("a null frame must be refused");
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage(), containsString("null"));
        }
        try {
            Native.stitch(new Object[] {new byte[FW * FH], new byte[10]}, FW, FH, OPTIONS, null);
            throw new AssertionError("a short frame must be refused");
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage(), containsString("frame 2"));
        }
    }

    /** The frames of an 8-bit sequence, for {@link Native#stitch} directly. */
    private static Object[] gray8Frames() {
        ImageStack st = sequence(cones.convertToByteProcessor(false), "frames").getStack();
        Object[] frames = new Object[st.getSize()];
        for (int i = 0; i < frames.length; i++) frames[i] = st.getPixels(i + 1);
        return frames;
    }

    /** The native options of {@link #options}. */
    private static final String OPTIONS = "rsz=25 cthresh=0.85 npts=6 search-radius=16 method=log blend=overwrite keyframe-shift=0.25 min-variance=4 subpixel backend=cpu";

    private static StitchResult nativeStitch(Object[] frames, Native.Progress progress) {
        return Native.stitch(frames, FW, FH, OPTIONS, progress);
    }

    @Test
    public void progressCallbackSeesEveryFrameAndCancelsAfterTheSecond() {
        Object[] frames = gray8Frames();
        List<Integer> seen = new ArrayList<>();
        StitchResult full = nativeStitch(frames, (done, total) -> {
            assertEquals(PATH.length, total);
            seen.add(done);
            return true;
        });
        assertEquals(PATH.length, seen.size());
        for (int i = 0; i < PATH.length; i++) assertEquals(i + 1, (int) seen.get(i));
        assertNotNull(full.pixels);

        seen.clear();
        try {
            nativeStitch(frames, (done, total) -> {
                seen.add(done);
                return done < 2;
            });
            throw new AssertionError("returning false from the callback must cancel the run");
        } catch (CancellationException expected) {
            assertThat(expected.getMessage(), containsString("after frame 2 of " + PATH.length));
        }
        assertEquals("no call after the one that said stop", Arrays.asList(1, 2), seen);
        // The bridge is fine afterwards: the same frames stitch again, to the same canvas.
        StitchResult again = nativeStitch(frames, null);
        assertArrayEquals((byte[]) full.pixels, (byte[]) again.pixels);
    }

    @Test
    public void anExceptionInTheProgressCallbackEndsTheRunAndReachesTheCaller() {
        Object[] frames = gray8Frames();
        ArithmeticException boom = new ArithmeticException("boom at frame 3");
        List<Integer> seen = new ArrayList<>();
        try {
            nativeStitch(frames, (done, total) -> {
                seen.add(done);
                if (done == 3) throw boom;
                return true;
            });
            throw new AssertionError("the callback's exception must reach the caller");
        } catch (ArithmeticException e) {
            assertSame(boom, e);
        }
        assertEquals(Arrays.asList(1, 2, 3), seen);
        assertNotNull(nativeStitch(frames, (done, total) -> true).pixels);
    }

    @Test
    public void escapeCancelsThePanoramaWithoutAnImageOrAnError() {
        // IJ.run clears the Esc flag when a command starts, so call the plugin's run
        // directly with Esc down: the first progress call (after frame 1) stops it.
        ImagePlus seq = sequence(cones.convertToByteProcessor(false), "esc");
        Tessera.backend = "cpu"; // another test may have left "cuda" from its dialog
        int before = WindowManager.getImageCount();
        IJ.setKeyDown(KeyEvent.VK_ESCAPE);
        try {
            assertTrue(IJ.escapePressed());
            assertNull("no panorama when cancelled", PanoramaPlugin.stitch(seq));
            assertNull("cancelling is not an error: " + Tessera.lastError(), Tessera.lastError());
            assertFalse("the Esc flag is reset", IJ.escapePressed());
            assertEquals(before, WindowManager.getImageCount());
        } finally {
            IJ.resetEscape();
        }
        // The next run goes through.
        ImagePlus pano = PanoramaPlugin.stitch(seq);
        assertNotNull(pano);
        assertEquals(PATH[PATH.length - 1][0] - PATH[0][0] + FW, pano.getWidth());
    }

    @Test
    public void sameAsTheCliOnTheSameStack() throws Exception {
        ImagePlus seq = sequence(cones, "cli");
        ImagePlus pano = run(seq, options("cpu"));
        java.io.File dir = java.nio.file.Files.createTempDirectory("tessera-stitch").toFile();
        java.io.File in = new java.io.File(dir, "sweep.tif"), out = new java.io.File(dir, "pano.tif"), rep = new java.io.File(dir, "report.json");
        assertTrue(new ij.io.FileSaver(seq).saveAsTiffStack(in.getPath()));
        Process p = new ProcessBuilder(Cli.binary().getPath(), "stitch", in.getPath(), "-o", out.getPath(), "--report", rep.getPath(),
                "--rsz", "25", "--cthresh", "0.85", "--npts", "6", "--search-radius", "16", "--min-variance", "4", "--method", "log",
                "--blend", "overwrite", "--keyframe-shift", "0.25", "--backend", "cpu").redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertEquals("tessera stitch failed: " + log, 0, p.waitFor());
        ImagePlus cli = IJ.openImage(out.getPath());
        assertNotNull(cli);
        assertEquals(cli.getWidth(), pano.getWidth());
        assertEquals(cli.getHeight(), pano.getHeight());
        int[] a = (int[]) pano.getProcessor().getPixels(), b = (int[]) cli.getProcessor().convertToRGB().getPixels();
        for (int i = 0; i < a.length; i++) assertEquals("canvas pixel " + i, b[i] & 0xffffff, a[i] & 0xffffff);
        // The report's positions are the table's.
        String json = new String(java.nio.file.Files.readAllBytes(rep.toPath()), java.nio.charset.StandardCharsets.UTF_8);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"x\":\\s*(-?[0-9.eE+-]+),\\s*\"y\":\\s*(-?[0-9.eE+-]+)").matcher(json);
        ResultsTable rt = (ResultsTable) pano.getProperty("TesseraFrames");
        for (int i = 0; i < PATH.length; i++) {
            assertTrue("report has frame " + i, m.find());
            assertEquals(Double.parseDouble(m.group(1)), rt.getValue("x", i), 5e-4); // the report rounds to 3 decimals
            assertEquals(Double.parseDouble(m.group(2)), rt.getValue("y", i), 5e-4);
        }
        for (java.io.File f : new java.io.File[] {in, out, rep, dir}) f.delete();
    }
}
