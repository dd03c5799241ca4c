package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.WindowManager;
import ij.macro.Interpreter;
import ij.process.ColorProcessor;
import ij.process.ImageProcessor;
import org.junit.AfterClass;
import org.junit.Before;
import org.junit.BeforeClass;
import org.junit.Test;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

/**
 * Grid Stitching's large-mosaic path: the mosaic composited in strips and streamed to a
 * pyramidal OME-TIFF, the image opened being the largest pyramid level that fits. The 3 x 3
 * grids of {@link GridStitchingPluginTest} (a mosaic of about 450 x 400) are forced through
 * it with 64-pixel OME tiles (so the file has four levels) and a pixel budget that only
 * level 1 meets; the level must equal the ordinary in-memory mosaic halved by the 2x2 mean
 * (ceil size, an odd last row or column averaging what it has, integers rounded half up).
 */
public class GridOmeTiffTest {
    private static final String CMD = "Grid Stitching (Tessera)...";
    private static final int COLS = GridStitchingPluginTest.COLS, ROWS = GridStitchingPluginTest.ROWS;

    @BeforeClass
    public static void setUp() throws Exception {
        IjHeadless.setUp();
        Interpreter.batchMode = true;
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

    private static String options(GridStitchingPluginTest.Grid g, String extra) {
        return "folder=[" + g.folder.getPath() + "] columns=" + COLS + " rows=" + ROWS + " overlap=25 order=snake-row start=top-left "
                + "blend=overwrite stage=0.1 " + extra;
    }

    private static ImagePlus runMacro(GridStitchingPluginTest.Grid g, String extra) {
        int before = WindowManager.getImageCount();
        IJ.run(CMD, options(g, extra));
        assertNull("no error expected: " + Tessera.lastError(), Tessera.lastError());
        assertEquals("one new image", before + 1, WindowManager.getImageCount());
        return WindowManager.getImage(WindowManager.getIDList()[before]);
    }

    /** The 2x2 mean of {@code ip} per channel, as the OME-TIFF writer halves a level. */
    static ImageProcessor halve(ImageProcessor ip) {
        int w = ip.getWidth(), h = ip.getHeight(), hw = (w + 1) / 2, hh = (h + 1) / 2;
        ImageProcessor out = ip.createProcessor(hw, hh);
        int channels = ip instanceof ColorProcessor ? 3 : 1;
        for (int y = 0; y < hh; y++) {
            for (int x = 0; x < hw; x++) {
                int[] px = new int[3];
                for (int c = 0; c < channels; c++) {
                    double sum = 0;
                    int n = 0;
                    for (int yy = 2 * y; yy <= Math.min(2 * y + 1, h - 1); yy++) {
                        for (int xx = 2 * x; xx <= Math.min(2 * x + 1, w - 1); xx++) {
                            sum += channels == 3 ? (ip.getPixel(xx, yy) >> (16 - 8 * c)) & 0xff : ip.getPixelValue(xx, yy);
                            n++;
                        }
                    }
                    px[c] = (int) ((sum + n / 2) / n);
                    if (channels == 1) out.putPixelValue(x, y, ip.getBitDepth() == 32 ? sum / n : px[0]);
                }
                if (channels == 3) out.putPixel(x, y, (px[0] << 16) | (px[1] << 8) | px[2]);
            }
        }
        return out;
    }

    private static void assertSamePixels(String what, ImageProcessor want, ImageProcessor got) {
        assertEquals(what + ": width", want.getWidth(), got.getWidth());
        assertEquals(what + ": height", want.getHeight(), got.getHeight());
        int mask = want instanceof ColorProcessor ? 0xffffff : -1; // RGB: the colours, not the alpha byte
        for (int y = 0; y < want.getHeight(); y++)
            for (int x = 0; x < want.getWidth(); x++)
                if ((want.getPixel(x, y) & mask) != (got.getPixel(x, y) & mask))
                    throw new AssertionError(what + ": pixel (" + x + ", " + y + ") is " + Integer.toHexString(got.getPixel(x, y)) + ", expected "
                            + Integer.toHexString(want.getPixel(x, y)));
    }

    private static void assertTiff(File f) throws IOException {
        assertTrue(f + " was written", f.isFile());
        byte[] head = new byte[4];
        try (InputStream in = Files.newInputStream(f.toPath())) {
            assertEquals(4, in.read(head));
        }
        assertArrayEquals("a little-endian (Big)TIFF header", new byte[] {'I', 'I', 42, 0}, new byte[] {head[0], head[1], (byte) (head[2] == 43 ? 42 : head[2]), head[3]});
    }

    private void levelOneEqualsTheHalvedMosaic(ImageProcessor photo, long seed) throws IOException {
        GridStitchingPluginTest.Grid g = GridStitchingPluginTest.cut(photo, seed);
        File ome = new File(g.folder.getParentFile(), g.folder.getName() + "-mosaic.ome.tif");
        try {
            // Forced, with the default file in the tile folder (the session's options set too).
            ImagePlus forced = runMacro(g, "save");
            File inFolder = new File(g.folder, GridStitchingPlugin.DEFAULT_OME);
            assertTiff(inFolder);
            assertEquals("level 0 fits: opened whole", GridStitchingPlugin.DEFAULT_OME, forced.getTitle());
            ImagePlus whole = GridStitchingPlugin.stitch(g.folder, COLS, ROWS); // the written file is not a tile
            assertNotNull("an ordinary run beside the written mosaic: " + Tessera.lastError(), whole);
            assertSamePixels("level 0", whole.getProcessor(), forced.getProcessor());
            assertNotNull("results tables as before", forced.getProperty("TesseraTiles"));
            assertNotNull(forced.getProperty("TesseraPairs"));

            int w = whole.getWidth(), h = whole.getHeight();
            long budget = (long) ((w + 1) / 2) * ((h + 1) / 2); // level 1 fits, level 0 does not
            for (boolean force : new boolean[] {true, false}) {
                assertTrue(!ome.exists() || ome.delete());
                ImagePlus level = GridStitchingPlugin.stitch(g.folder, COLS, ROWS, ome, force, 64, budget);
                assertNotNull("level 1 (force " + force + "): " + Tessera.lastError(), level);
                assertTiff(ome);
                assertSamePixels("level 1 (force " + force + ")", halve(whole.getProcessor()), level.getProcessor());
                assertThat(level.getTitle(), containsString("level 1, 1/2"));
                String info = (String) level.getProperty("Info");
                assertThat(info, containsString(ome.getPath()));
                assertThat(info, containsString("pyramid level 1"));
                assertThat(info, containsString("downsampled 2x2"));
                assertEquals("calibration scaled by the factor", 2 * whole.getCalibration().pixelWidth, level.getCalibration().pixelWidth, 1e-12);
                assertEquals(whole.getCalibration().xOrigin / 2, level.getCalibration().xOrigin, 1e-12);
                assertEquals("tables as before", COLS * ROWS, ((ij.measure.ResultsTable) level.getProperty("TesseraTiles")).size());
            }
        } finally {
            ome.delete();
            File[] files = g.folder.listFiles();
            if (files != null) for (File f : files) f.delete();
            g.folder.delete();
        }
    }

    @Test
    public void gray8LevelEqualsTheHalvedMosaic() throws IOException {
        levelOneEqualsTheHalvedMosaic(GridStitchingPluginTest.photo("ihc"), 11);
    }

    @Test
    public void rgbLevelEqualsTheHalvedMosaic() throws IOException {
        ColorProcessor rgb = new ColorProcessor(512, 512);
        rgb.setRGB((byte[]) GridStitchingPluginTest.photo("astronaut").getPixels(), (byte[]) GridStitchingPluginTest.photo("grass").getPixels(),
                (byte[]) GridStitchingPluginTest.photo("camera").getPixels());
        levelOneEqualsTheHalvedMosaic(rgb, 12);
    }

    @Test
    public void cancellingWhileStreamingLeavesNoFile() throws IOException {
        GridStitchingPluginTest.Grid g = GridStitchingPluginTest.cut(GridStitchingPluginTest.photo("ihc"), 14);
        File ome = new File(g.folder, "cancelled.ome.tif");
        try {
            TileFolder tiles = TileFolder.read(g.folder, COLS * ROWS);
            int w = tiles.first.getWidth(), h = tiles.first.getHeight();
            String opts = "overlap=25 order=snake-row start=top-left stage-error=0.1";
            int[] rowCalls = {0};
            try {
                // 12 pairs, then the mosaic's rows: stop at the first strip written.
                Native.stitchGrid(tiles.pixels, w, h, COLS, ROWS, opts, ome.getPath(), true, 64, 0, (done, total) -> {
                    if (total == 12) return true;
                    rowCalls[0]++;
                    return false;
                });
                throw new AssertionError("not cancelled");
            } catch (java.util.concurrent.CancellationException e) {
                assertThat(e.getMessage(), containsString("cancelled"));
            }
            assertEquals("stopped at the first strip", 1, rowCalls[0]);
            assertFalse("the incomplete file is removed", ome.exists());
        } finally {
            File[] files = g.folder.listFiles();
            if (files != null) for (File f : files) f.delete();
            g.folder.delete();
        }
    }

    @Test
    public void anUnwritableOutputIsAnErrorNotACrash() throws IOException {
        GridStitchingPluginTest.Grid g = GridStitchingPluginTest.cut(GridStitchingPluginTest.photo("camera"), 13);
        try {
            runMacro(g, ""); // the session's options
            // A folder that cannot be made: its parent is a file.
            File bad = new File(new File(g.folder, "tile_1.tif"), "mosaic.ome.tif");
            // Outside batch mode: in a batch macro ImageJ turns IJ.error into "Macro canceled".
            Interpreter.batchMode = false;
            try {
                assertNull(GridStitchingPlugin.stitch(g.folder, COLS, ROWS, bad, true, 64, 1 << 20));
            } finally {
                Interpreter.batchMode = true;
            }
            assertThat(String.valueOf(Tessera.lastError()), containsString("cannot"));
            assertThat(Tessera.lastError(), containsString("tile_1.tif"));
            assertTrue("the tile is untouched", new File(g.folder, "tile_1.tif").isFile());
            // A bad tile side is an error too.
            Tessera.clearLastError();
            Interpreter.batchMode = false;
            try {
                assertNull(GridStitchingPlugin.stitch(g.folder, COLS, ROWS, new File(g.folder, "m.ome.tif"), true, 40, 1 << 20));
            } finally {
                Interpreter.batchMode = true;
            }
            assertThat(String.valueOf(Tessera.lastError()), containsString("multiple of 16"));
            assertFalse(new File(g.folder, "m.ome.tif").exists());
            // The next run goes through.
            Tessera.clearLastError();
            assertNotNull(GridStitchingPlugin.stitch(g.folder, COLS, ROWS));
        } finally {
            File[] files = g.folder.listFiles();
            if (files != null) for (File f : files) f.delete();
            g.folder.delete();
        }
    }
}
