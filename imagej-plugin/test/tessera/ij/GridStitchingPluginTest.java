package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.WindowManager;
import ij.io.FileSaver;
import ij.macro.Interpreter;
import ij.measure.ResultsTable;
import ij.process.ColorProcessor;
import ij.process.ImageProcessor;
import org.junit.AfterClass;
import org.junit.Before;
import org.junit.BeforeClass;
import org.junit.Test;

import java.awt.event.KeyEvent;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CancellationException;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

/**
 * Plugins > Tessera > Grid Stitching (Tessera)... on 3 x 3 grids cut from real photographs
 * (the repository's assets/photos; for RGB three of them as the channels): 180 x 160 tiles
 * overlapping by 25 %, each up to 3 % of a tile off its stage position (whole pixels, so the
 * truth is exact; more would leave some vertical overlaps narrower than the 25-pixel
 * templates), with noise, written as files to a temporary folder in snake-row order.
 */
public class GridStitchingPluginTest {
    private static final String CMD = "Grid Stitching (Tessera)...";
    static final int TW = 180, TH = 160, COLS = 3, ROWS = 3;
    static final double OVERLAP = 0.25, JITTER = 0.03;

    @BeforeClass
    public static void setUp() throws Exception {
        IjHeadless.setUp();
        Interpreter.batchMode = true; // shown images are kept for WindowManager, headless
    }

    @AfterClass
    public static void tearDown() {
        Interpreter.batchMode = false;
    }

    @Before
    public void clear() {
        Tessera.clearLastError();
        IJ.resetEscape();
    }

    static ImageProcessor photo(String name) {
        File f = new File(System.getProperty("tessera.assets", "../assets"), "photos/" + name + ".png");
        ImagePlus imp = IJ.openImage(f.getPath());
        assertNotNull("ImageJ could not open " + f, imp);
        return imp.getProcessor();
    }

    /** A cut grid: the tiles' files in acquisition order and their true top-left corners. */
    static final class Grid {
        final File folder;
        final int[][] truth;

        Grid(File folder, int[][] truth) {
            this.folder = folder;
            this.truth = truth;
        }
    }

    /**
     * Cuts a snake-row 3 x 3 grid from {@code src} (12 px in from its corner, each tile off
     * its stage position by up to {@link #JITTER} of a tile), adds Gaussian noise of sigma 2 (gray
     * levels of 8 bits) and saves the tiles as TIFF files named so that natural order is
     * acquisition order (tile_1 ... tile_9, with tile_10-style names sorting after them).
     */
    static Grid cut(ImageProcessor src, long seed) throws IOException {
        File dir = Files.createTempDirectory("tessera-grid").toFile();
        Random rng = new Random(seed);
        int[][] truth = new int[COLS * ROWS][];
        double sx = TW * (1 - OVERLAP), sy = TH * (1 - OVERLAP);
        for (int k = 0; k < COLS * ROWS; k++) {
            int r = k / COLS, c = r % 2 == 0 ? k % COLS : COLS - 1 - k % COLS;
            int x = 12 + (int) Math.round(c * sx + (rng.nextDouble() * 2 - 1) * JITTER * TW);
            int y = 12 + (int) Math.round(r * sy + (rng.nextDouble() * 2 - 1) * JITTER * TH);
            truth[k] = new int[] {x, y};
            src.setRoi(x, y, TW, TH);
            ImageProcessor tile = src.crop();
            double scale = tile.getBitDepth() == 16 ? 257 : 1;
            if (tile.getBitDepth() != 24) {
                for (int i = 0; i < TW * TH; i++) tile.setf(i, (float) Math.max(0, Math.min(255 * scale, tile.getf(i) + rng.nextGaussian() * 2 * scale)));
            }
            assertTrue(new FileSaver(new ImagePlus("t", tile)).saveAsTiff(new File(dir, "tile_" + (k + 1) + ".tif").getPath()));
        }
        src.resetRoi();
        return new Grid(dir, truth);
    }

    /** The macro options of a run on {@code g}: one plane unless {@code extra} says otherwise
     *  (the session keeps the last values a dialog had). */
    private static String options(Grid g, String extra) {
        String planes = extra.contains("channels=") ? "" : "channels=1 time=1 cycles=1 register=1 ";
        String names = extra.contains("names=") ? "" : "names=[] ";
        return "folder=[" + g.folder.getPath() + "] columns=" + COLS + " rows=" + ROWS + " overlap=25 order=snake-row start=top-left "
                + "blend=overwrite stage=0.1 " + names + planes + extra;
    }

    /** Runs the command as a macro does (options given: no dialog) and returns the new image. */
    private static ImagePlus run(Grid g) {
        int before = WindowManager.getImageCount();
        IJ.run(CMD, options(g, ""));
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        assertEquals("one new image", before + 1, WindowManager.getImageCount());
        return WindowManager.getImage(WindowManager.getIDList()[before]);
    }

    /** Every tile registered, within 0.5 px of the truth (relative to tile 1), every pair accepted. */
    private static void checkPositions(ImagePlus mosaic, Grid g) {
        ResultsTable tiles = (ResultsTable) mosaic.getProperty("TesseraTiles");
        ResultsTable pairs = (ResultsTable) mosaic.getProperty("TesseraPairs");
        assertNotNull("the tile table is attached to the mosaic", tiles);
        assertNotNull("the pair table is attached to the mosaic", pairs);
        assertEquals(COLS * ROWS, tiles.size());
        assertEquals("neighbouring pairs of a 3x3 grid", 12, pairs.size());
        for (int i = 0; i < tiles.size(); i++) {
            assertEquals("tile " + (i + 1), "ok", tiles.getStringValue("Status", i));
            double ex = g.truth[i][0] - g.truth[0][0], ey = g.truth[i][1] - g.truth[0][1];
            double err = Math.hypot(tiles.getValue("x", i) - ex, tiles.getValue("y", i) - ey);
            assertTrue("tile " + (i + 1) + " is " + err + " px from the truth", err <= 0.5);
            assertEquals("tile_" + (i + 1) + ".tif", tiles.getLabel(i));
        }
        for (int k = 0; k < pairs.size(); k++) {
            assertEquals("pair " + pairs.getLabel(k) + ": " + pairs.getStringValue("Reason", k), "accepted", pairs.getStringValue("Status", k));
            assertTrue(pairs.getValue("NCC", k) > 0.5);
            assertTrue(pairs.getValue("Residual", k) < 0.5);
        }
        int xs = 0, ys = 0;
        for (int[] t : g.truth) {
            xs = Math.max(xs, t[0] - g.truth[0][0]);
            ys = Math.max(ys, t[1] - g.truth[0][1]);
        }
        assertTrue("the mosaic spans the grid", mosaic.getWidth() >= xs + TW && mosaic.getWidth() <= 3 * TW);
        assertTrue(mosaic.getHeight() >= ys + TH && mosaic.getHeight() <= 3 * TH);
    }

    private static void delete(Grid g) {
        File[] files = g.folder.listFiles();
        if (files != null) for (File f : files) f.delete();
        g.folder.delete();
    }

    @Test
    public void gray8GridFromAPhotographRegistersWithinHalfAPixel() throws IOException {
        Grid g = cut(photo("ihc"), 1);
        ImagePlus mosaic = run(g);
        assertEquals(ImagePlus.GRAY8, mosaic.getType());
        checkPositions(mosaic, g);
        delete(g);
    }

    @Test
    public void gray16GridKeepsSixteenBits() throws IOException {
        ImageProcessor wide = photo("gravel").convertToShortProcessor(false);
        wide.multiply(257); // the whole 16-bit range, as a camera gives
        Grid g = cut(wide, 2);
        ImagePlus mosaic = run(g);
        assertEquals(ImagePlus.GRAY16, mosaic.getType());
        checkPositions(mosaic, g);
        assertTrue("16-bit values survive", mosaic.getProcessor().getStatistics().max > 255);
        delete(g);
    }

    @Test
    public void rgbGridStaysRgb() throws IOException {
        // A colour photograph of the right size: three photographs as its channels.
        ColorProcessor rgb = new ColorProcessor(512, 512);
        rgb.setRGB((byte[]) photo("astronaut").getPixels(), (byte[]) photo("grass").getPixels(), (byte[]) photo("camera").getPixels());
        Grid g = cut(rgb, 3);
        ImagePlus mosaic = run(g);
        assertEquals(ImagePlus.COLOR_RGB, mosaic.getType());
        checkPositions(mosaic, g);
        delete(g);
    }

    /** Runs the command expecting an IJ.error (outside batch mode: in a batch macro
     *  ImageJ turns IJ.error into "Macro canceled"), and no new image. */
    private static void runExpectingError(String opts, String expected) {
        int before = WindowManager.getImageCount();
        Interpreter.batchMode = false;
        try {
            IJ.run(CMD, opts);
        } finally {
            Interpreter.batchMode = true;
        }
        assertNotNull("an IJ.error was expected", Tessera.lastError());
        assertThat(Tessera.lastError(), containsString(expected));
        assertEquals(before, WindowManager.getImageCount());
    }

    @Test
    public void aVignettedGridIsCorrectedForShading() throws IOException {
        // 30 % vignetting (radial, darkest at the tiles' corners) on every tile.
        Grid g = cut(photo("gravel"), 8);
        File[] files = g.folder.listFiles();
        assertNotNull(files);
        for (File f : files) {
            ImagePlus imp = IJ.openImage(f.getPath());
            ImageProcessor ip = imp.getProcessor();
            for (int y = 0; y < TH; y++)
                for (int x = 0; x < TW; x++) {
                    double r2 = Math.pow((x - TW / 2.0) / (TW / 2.0), 2) + Math.pow((y - TH / 2.0) / (TH / 2.0), 2);
                    ip.setf(x, y, (float) (ip.getf(x, y) * (1 - 0.3 * r2 / 2)));
                }
            assertTrue(new FileSaver(imp).saveAsTiff(f.getPath()));
        }
        int before = WindowManager.getImageCount();
        IJ.run(CMD, options(g, "flatfield=estimate"));
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        ImagePlus corrected = WindowManager.getImage(WindowManager.getIDList()[before]);
        checkPositions(corrected, g);
        // The corrected corners are as bright as the centres; uncorrected they are not.
        IJ.run(CMD, options(g, "flatfield=none"));
        ImagePlus raw = WindowManager.getImage(WindowManager.getIDList()[before + 1]);
        double rawRatio = cornerToCentre(raw), ratio = cornerToCentre(corrected);
        assertTrue("corner / centre " + rawRatio + " uncorrected, " + ratio + " corrected", ratio > rawRatio + 0.05);
        runExpectingError(options(g, "flatfield=[/no/such/flat.tif]"), "flat.tif");
        // The session keeps the last values: back to none for the tests after this one.
        Tessera.clearLastError();
        IJ.run(CMD, options(g, "flatfield=none"));
        assertNull(Tessera.lastError());
        delete(g);
    }

    @Test
    public void channelsAndTimePointsMakeAHyperstack() throws IOException {
        // Two channels (two photographs cut at the same stage positions) at two time points,
        // block after block: tile_1..9 channel 1 at time 1, tile_10..18 channel 2, then time 2.
        String[] photos = {"ihc", "grass"};
        File dir = Files.createTempDirectory("tessera-planes").toFile();
        Grid first = null;
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < 2; c++) {
                Grid block = cut(photo(photos[c]), 11);
                if (first == null) first = block;
                for (int k = 0; k < COLS * ROWS; k++) {
                    int index = ((t * 2 + c) * COLS * ROWS) + k + 1;
                    assertTrue(new File(block.folder, "tile_" + (k + 1) + ".tif").renameTo(new File(dir, "tile_" + index + ".tif")));
                }
                block.folder.delete();
            }
        Grid g = new Grid(dir, first.truth);
        int before = WindowManager.getImageCount();
        IJ.run(CMD, options(g, "channels=2 time=2 cycles=1 register=2"));
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        ImagePlus mosaic = WindowManager.getImage(WindowManager.getIDList()[before]);
        assertEquals(2, mosaic.getNChannels());
        assertEquals(2, mosaic.getNFrames());
        assertTrue("two channels show as a composite image", mosaic.isComposite());
        // The tables are of time point 1's registration channel (channel 2: tile_10..18).
        ResultsTable tiles = (ResultsTable) mosaic.getProperty("TesseraTiles");
        assertEquals("tile_10.tif", tiles.getLabel(0));
        for (int i = 0; i < tiles.size(); i++) {
            double err = Math.hypot(tiles.getValue("x", i) - (g.truth[i][0] - g.truth[0][0]), tiles.getValue("y", i) - (g.truth[i][1] - g.truth[0][1]));
            assertTrue("tile " + (i + 1) + " is " + err + " px from the truth", err <= 0.5);
        }
        // Each channel shows its own photograph, the same at both time points.
        ImageProcessor c1t1 = mosaic.getStack().getProcessor(mosaic.getStackIndex(1, 1, 1));
        ImageProcessor c2t1 = mosaic.getStack().getProcessor(mosaic.getStackIndex(2, 1, 1));
        ImageProcessor c1t2 = mosaic.getStack().getProcessor(mosaic.getStackIndex(1, 1, 2));
        double across = 0, between = 0;
        int n = 0;
        for (int y = 20; y < TH; y += 3)
            for (int x = 20; x < TW; x += 3) {
                across += Math.abs(c1t1.getf(x, y) - c2t1.getf(x, y));
                between += Math.abs(c1t1.getf(x, y) - c1t2.getf(x, y));
                n++;
            }
        assertTrue("channels differ: " + across / n, across / n > 10);
        assertTrue("time points agree: " + between / n, between / n < 4);
        // Saving the planes is the command line's, and a grid of the wrong count is refused.
        runExpectingError(options(g, "channels=2 time=2 cycles=1 register=1 save"), "--channels 2 --time-points 2");
        Tessera.clearLastError();
        runExpectingError(options(g, "channels=3 time=2 cycles=1 register=1"), "54 tiles");
        Tessera.clearLastError();
        runExpectingError(options(g, "channels=2 time=2 cycles=1 register=3"), "register channel");
        Tessera.clearLastError();
        runExpectingError(options(g, "channels=2 time=2 cycles=2 register=1"), "not both");
        // The same blocks as two cycles: four channels at one time point.
        Tessera.clearLastError();
        IJ.run(CMD, options(g, "channels=2 time=1 cycles=2 register=1"));
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        ImagePlus cycles = WindowManager.getImage(WindowManager.getIDList()[WindowManager.getImageCount() - 1]);
        assertEquals(4, cycles.getNChannels());
        assertEquals(1, cycles.getNFrames());
        // The same tiles named as a MetaMorph scan names them (channel number and name, site,
        // time point): the names give the channels and time points, the mosaic is the same.
        for (int k = 1; k <= 4 * COLS * ROWS; k++) {
            int block = (k - 1) / (COLS * ROWS), site = (k - 1) % (COLS * ROWS) + 1;
            String name = "scan_w" + (block % 2 + 1) + (block % 2 == 0 ? "DAPI" : "GFP") + "_s" + site + "_t" + (block / 2 + 1) + ".tif";
            assertTrue(new File(dir, "tile_" + k + ".tif").renameTo(new File(dir, name)));
        }
        Tessera.clearLastError();
        IJ.run(CMD, options(g, "names=[scan_w{c}*_s{i}_t{t}.tif] channels=1 time=1 cycles=1 register=2"));
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        ImagePlus named = WindowManager.getImage(WindowManager.getIDList()[WindowManager.getImageCount() - 1]);
        assertEquals(2, named.getNChannels());
        assertEquals(2, named.getNFrames());
        for (int k = 1; k <= mosaic.getStackSize(); k++) {
            ImageProcessor a = mosaic.getStack().getProcessor(k), b = named.getStack().getProcessor(k);
            for (int y = 0; y < a.getHeight(); y++)
                for (int x = 0; x < a.getWidth(); x++) assertEquals("plane " + k + " at " + x + "," + y, a.getf(x, y), b.getf(x, y), 0);
        }
        runExpectingError(options(g, "names=[scan_w{c}*_s{i}_t{t}.tif] channels=3 time=1 cycles=1 register=1"), "the file names give 2");
        Tessera.clearLastError();
        runExpectingError(options(g, "names=[other_{i}.tif] channels=1 time=1 cycles=1 register=1"), "matches no image file");
        // The session keeps the last values: back to one plane for the tests after this one.
        Tessera.clearLastError();
        File[] files = dir.listFiles();
        if (files != null) for (File f : files) f.delete();
        dir.delete();
        GridStitchingPlugin.options().set("channels", 1).set("time-points", 1).set("cycles", 1).set("register-channel", 0).set("reuse-positions", false);
    }

    /** The mean of tile 1's top-left corner over the mean of its centre, in the mosaic. */
    private static double cornerToCentre(ImagePlus mosaic) {
        ImageProcessor ip = mosaic.getProcessor();
        double corner = 0, centre = 0;
        for (int y = 0; y < 20; y++)
            for (int x = 0; x < 20; x++) {
                corner += ip.getf(x, y);
                centre += ip.getf(TW / 2 - 10 + x, TH / 2 - 10 + y);
            }
        return corner / centre;
    }

    @Test
    public void badInputIsAnErrorMessageNotACrash() throws IOException {
        File empty = Files.createTempDirectory("tessera-empty").toFile();
        runExpectingError("folder=[" + empty.getPath() + "] columns=3 rows=3 overlap=25", "no image files");
        empty.delete();

        Grid g = cut(photo("camera"), 4);
        Tessera.clearLastError();
        runExpectingError("folder=[" + g.folder.getPath() + "] columns=4 rows=3 overlap=25", "the grid has 12 tiles");
        Tessera.clearLastError();
        runExpectingError(options(g, "").replace("overlap=25", "overlap=95"), "overlap");
        Tessera.clearLastError();
        runExpectingError(options(g, "").replace("columns=3", "columns=1.5"), "whole numbers");
        // One tile of another size.
        ImageProcessor small = photo("camera");
        small.setRoi(0, 0, TW - 20, TH);
        assertTrue(new FileSaver(new ImagePlus("t", small.crop())).saveAsTiff(new File(g.folder, "tile_5.tif").getPath()));
        Tessera.clearLastError();
        runExpectingError(options(g, ""), "tile_5.tif is 160x160 8-bit");
        delete(g);
    }

    @Test
    public void theNativeEntryRefusesMixedTypesAndAWrongCount() {
        Object[] mixed = {new byte[TW * TH], new short[TW * TH], new byte[TW * TH], new byte[TW * TH]};
        try {
            Native.stitchGrid(mixed, TW, TH, 2, 2, "overlap=25", null);
            throw new AssertionError("mixed tile types must be refused");
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage(), containsString("frame 2"));
        }
        try {
            Native.stitchGrid(new Object[] {new byte[TW * TH], new byte[TW * TH]}, TW, TH, 2, 2, "overlap=25", null);
            throw new AssertionError("2 tiles are not a 2x2 grid");
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage(), containsString("2x2 grid is 4 tiles"));
        }
        try {
            Native.stitchGrid(new Object[] {new byte[TW * TH], new byte[TW * TH + 7]}, TW, TH, 2, 1, "overlap=25", null);
            throw new AssertionError("a tile of another size must be refused");
        } catch (IllegalArgumentException expected) {
            assertThat(expected.getMessage(), containsString("frame 2 holds"));
        }
    }

    @Test
    public void progressCountsThePairsAndFalseCancels() throws IOException {
        Grid g = cut(photo("grass"), 5);
        Object[] tiles = new Object[COLS * ROWS];
        for (int i = 0; i < tiles.length; i++) tiles[i] = IJ.openImage(new File(g.folder, "tile_" + (i + 1) + ".tif").getPath()).getProcessor().getPixels();
        String opts = "overlap=25 order=snake-row";
        List<Integer> seen = new ArrayList<>();
        GridResult full = Native.stitchGrid(tiles, TW, TH, COLS, ROWS, opts, (done, total) -> {
            assertEquals(12, total);
            seen.add(done);
            return true;
        });
        assertEquals(Arrays.asList(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), seen);
        assertNotNull(full.pixels);
        seen.clear();
        try {
            Native.stitchGrid(tiles, TW, TH, COLS, ROWS, opts, (done, total) -> {
                seen.add(done);
                return done < 3;
            });
            throw new AssertionError("returning false from the callback must cancel the run");
        } catch (CancellationException expected) {
            assertThat(expected.getMessage(), containsString("after pair 3 of 12"));
        }
        assertEquals("no call after the one that said stop", Arrays.asList(0, 1, 2, 3), seen);
        delete(g);
    }

    @Test
    public void escapeCancelsWithoutAnImageOrAnError() throws IOException {
        Grid g = cut(photo("astronaut"), 6);
        run(g); // sets the session's options (snake-row, 20 %)
        int before = WindowManager.getImageCount();
        IJ.setKeyDown(KeyEvent.VK_ESCAPE);
        try {
            assertTrue(IJ.escapePressed());
            assertNull("no mosaic when cancelled", GridStitchingPlugin.stitch(g.folder, COLS, ROWS));
            assertNull("cancelling is not an error: " + Tessera.lastError(), Tessera.lastError());
            assertFalse("the Esc flag is reset", IJ.escapePressed());
            assertEquals(before, WindowManager.getImageCount());
        } finally {
            IJ.resetEscape();
        }
        assertNotNull("the next run goes through", GridStitchingPlugin.stitch(g.folder, COLS, ROWS));
        delete(g);
    }

    @Test
    public void naturalOrderSortsNumbersAsNumbers() {
        String[] names = {"tile_10.tif", "tile_2.tif", "tile_1.tif", "a.tif", "tile_002b.tif"};
        Arrays.sort(names, TileFolder::natural);
        assertEquals(Arrays.asList("a.tif", "tile_1.tif", "tile_2.tif", "tile_002b.tif", "tile_10.tif"), Arrays.asList(names));
    }
}
