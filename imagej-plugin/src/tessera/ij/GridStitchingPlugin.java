package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.measure.Calibration;
import ij.measure.ResultsTable;
import ij.plugin.PlugIn;

import java.io.File;

/**
 * Plugins &gt; Tessera &gt; Grid Stitching (Tessera)...: stitches the tiles of a microscope
 * scan, a folder of image files (natural order = acquisition order) on a cols x rows grid
 * with a nominal overlap, acquired row by row, column by column or in a snake, from one
 * corner. Every neighbouring pair is registered from its nominal offset by NCC templates
 * (phase correlation of the overlap strips where the stage is further off), all positions
 * are solved together, and a pair that disagrees with the rest is rejected; a pair is
 * accepted only where it agrees with the stage model fitted to the pairs (or with other
 * pairs); a group of tiles no accepted pair joins to the rest is flagged "detached", a tile
 * no accepted pair reaches "nominal", both placed by that model. The same run as
 * {@code tessera stitch TILES --grid COLSxROWS}. A progress bar follows the pairs and Esc
 * cancels the run (no image is made).
 *
 * <p>Output: the mosaic (the tiles' pixel type: 8-bit, 16-bit, 32-bit or RGB, the first
 * tile's spatial calibration, its origin set so that tile 1 keeps its coordinates), and two
 * Results tables, also attached to the mosaic as the properties {@code TesseraTiles} and
 * {@code TesseraPairs}: "Grid tiles" (x, y, status, residual) and "Grid pairs" (offset, NCC,
 * margin, vectors, residual, or why rejected).
 *
 * <p>Large mosaics: one too large for one ImageJ image (over 2^28 pixels, or over what the
 * Java heap has free), or any mosaic when "Save as pyramidal OME-TIFF" is ticked, is
 * composited in strips and streamed to a tiled, pyramidal OME-TIFF (the command line's
 * writer: each level the previous halved by a 2x2 mean), by default {@code mosaic.ome.tif}
 * in the tile folder (that file, and the run's own output, are never read as tiles). The image opened is then the
 * largest level of that pyramid that fits, titled and described (Info) with its level and
 * downsampling factor, its calibration scaled by that factor; the file's path is logged.
 * <p>Shading: with "Flatfield" {@code estimate} (from the tiles themselves) or an image file
 * (and optionally "Darkfield"), the tiles are corrected for the microscope's uneven
 * illumination before registration and in the mosaic, as {@code --flatfield} does.
 * <p>Channels and time points: with "Channels" C and "Time points" T above 1, the folder
 * holds the grid C x T times, block after block in file-name order (every tile of channel 1
 * at time point 1, then of channel 2, ...), as {@code tessera stitch --channels C
 * --time-points T} takes it. Each time point is registered on "Register channel" (or, with
 * "Reuse positions", placed where the first registered), later time points are brought onto
 * the first, and the mosaic is a hyperstack of C channels and T frames (a composite image
 * when C &gt; 1). "Cycles" K in place of time points: K re-stainings of one slide, each
 * brought onto the first wherever the slide was put back, every cycle's channels shown as
 * channels (C x K of them, one frame); the tables are those of time point 1 on the registration channel. Saving
 * the planes as one OME-TIFF is the command line's ({@code -o mosaic.ome.tif}); the error
 * says the command.
 * <p>Names: a pattern of the tiles' file names with fields ({@code img_r{yy}_c{xx}_ch{c}.tif}:
 * {@code {x}} column, {@code {y}} row, {@code {i}} tile, {@code {c}} channel, {@code {t}} time
 * point or cycle, a letter repeated for fixed digits, {@code *} any text) takes the tiles it
 * names in their order, with the grid, channels and time points the names give, as the
 * command line's pattern input does.
 * Macro: {@code run("Grid Stitching (Tessera)...", "folder=/data/scan columns=4 rows=3 overlap=10 order=snake-row start=top-left blend=overwrite stage=0.1 flatfield=estimate")},
 * add {@code names=[img_r{yy}_c{xx}_ch{c}.tif]} to take the tiles a pattern names,
 * add {@code save} to always write the OME-TIFF and {@code ome=[/path/mosaic.ome.tif]} to choose the file, and
 * {@code channels=2 time=3 register=1 reuse} (or {@code cycles=3} in place of {@code time}) for planes (register counts
 * channels from 1).
 */
public class GridStitchingPlugin implements PlugIn {
    static final String TITLE = "Grid Stitching (Tessera)";
    static final String TILE_TABLE = "Grid tiles", PAIR_TABLE = "Grid pairs";
    static final String[] ORDERS = {"row", "column", "snake-row", "snake-column"};
    static final String[] CORNERS = {"top-left", "top-right", "bottom-left", "bottom-right"};
    /** The last values of the session: native defaults at first, and the grid's shape. */
    private static Options last;
    private static String lastFolder = "";
    private static String lastNames = "";
    private static int lastColumns = 2, lastRows = 2;
    private static boolean lastSave;
    private static String lastOme = "";
    /** The OME-TIFF's default name, in the tile folder. */
    static final String DEFAULT_OME = "mosaic.ome.tif";
    /** The OME-TIFF's tile side, as the command line's default. */
    static final int OME_TILE = 512;

    @Override
    public void run(String arg) {
        Params gd = new Params(TITLE);
        try {
            options();
        } catch (RuntimeException e) {
            Tessera.error(TITLE, e);
            return;
        }
        gd.addDirectory("Folder (of tiles)", lastFolder);
        gd.addString("Names (of the tile files, e.g. img_r{yy}_c{xx}_ch{c}.tif; empty: every image)", lastNames);
        gd.addNumber("Columns", lastColumns, 0, "tiles");
        gd.addNumber("Rows", lastRows, 0, "tiles");
        gd.addNumber("Overlap", last.number("overlap"), 1, "% of a tile");
        gd.addChoice("Order", ORDERS, last.get("order"));
        gd.addChoice("Start (first tile's corner)", CORNERS, last.get("start"));
        gd.addChoice("Blend", PanoramaPlugin.BLENDS, last.get("blend"));
        gd.addNumber("Stage error (fraction of a tile)", last.number("stage-error"), 2, "");
        gd.addString("Flatfield (none, estimate from the tiles, or an image file)", last.get("flatfield"));
        gd.addString("Darkfield (none, estimate, or an image file; with a flat field)", last.get("darkfield"));
        gd.addNumber("Channels (blocks of tiles)", last.integer("channels"), 0, "");
        gd.addNumber("Time points (blocks of channels)", last.integer("time-points"), 0, "");
        gd.addNumber("Cycles (of a re-stained slide, in place of time points)", last.integer("cycles"), 0, "");
        gd.addNumber("Register channel", last.integer("register-channel") + 1, 0, "(from 1)");
        gd.addCheckbox("Reuse positions (later time points placed as the first)", last.flag("reuse-positions"));
        gd.addCheckbox("Save as pyramidal OME-TIFF (always; a mosaic too large for ImageJ is saved anyway)", lastSave);
        gd.addString("OME-TIFF file (empty: " + DEFAULT_OME + " in the tile folder)", lastOme);
        gd.addMessage("Tiles: every image of the folder in natural file-name order, or those the names give; registration runs on the CPU.");
        if (!gd.show()) return;
        int cols, rows;
        String folder;
        try {
            folder = gd.nextString().trim();
            lastNames = gd.nextString().trim();
            double c = gd.nextNumber(), r = gd.nextNumber(), overlap = gd.nextNumber();
            String order = gd.nextChoice(), start = gd.nextChoice(), blend = gd.nextChoice();
            double stage = gd.nextNumber();
            String flat = gd.nextString().trim(), dark = gd.nextString().trim();
            double channels = gd.nextNumber(), times = gd.nextNumber(), cycles = gd.nextNumber(), register = gd.nextNumber();
            boolean reuse = gd.nextBoolean();
            lastSave = gd.nextBoolean();
            lastOme = gd.nextString().trim();
            if (gd.invalidNumber() || c != Math.rint(c) || r != Math.rint(r) || c < 1 || r < 1)
                throw new IllegalArgumentException("columns and rows must be whole numbers of at least 1");
            if (folder.isEmpty()) throw new IllegalArgumentException("choose the folder of tiles");
            if (channels != Math.rint(channels) || times != Math.rint(times) || cycles != Math.rint(cycles) || register != Math.rint(register)
                    || channels < 1 || times < 1 || cycles < 1 || register < 1 || (register > channels && lastNames.isEmpty()))
                throw new IllegalArgumentException(
                        "channels, time points and cycles must be whole numbers of at least 1, and the register channel one of the channels");
            if (times > 1 && cycles > 1) throw new IllegalArgumentException("give time points or cycles, not both");
            cols = (int) c;
            rows = (int) r;
            last.set("overlap", overlap).set("order", order).set("start", start).set("blend", blend).set("stage-error", stage)
                    .set("flatfield", flat.isEmpty() ? "none" : flat).set("darkfield", dark.isEmpty() ? "none" : dark)
                    .set("channels", (int) channels).set("time-points", (int) times).set("cycles", (int) cycles)
                    .set("register-channel", (int) register - 1).set("reuse-positions", reuse);
            lastFolder = folder;
            lastColumns = cols;
            lastRows = rows;
        } catch (IllegalArgumentException e) {
            Tessera.error(TITLE, e);
            return;
        }
        File dir = new File(folder);
        File ome = lastOme.isEmpty() ? new File(dir, DEFAULT_OME) : new File(lastOme);
        ImagePlus mosaic = stitch(dir, lastNames, cols, rows, ome, lastSave, OME_TILE, heapPixels());
        if (mosaic != null) mosaic.show();
    }

    /** The session's options, the native defaults at first. */
    static Options options() {
        if (last == null) last = Options.defaults("grid");
        return last;
    }

    /**
     * Stitches the tiles of {@code folder} as a {@code cols x rows} grid with the current
     * options; null after an error (shown with IJ.error) or when cancelled (Esc: status
     * "Grid stitching cancelled ...", no image, no error message, the Esc flag reset).
     */
    static ImagePlus stitch(File folder, int cols, int rows) {
        return stitch(folder, cols, rows, new File(folder, DEFAULT_OME), false, OME_TILE, heapPixels());
    }

    /**
     * Pixels of the tiles' type that the mosaic may have as an ImageJ image: the Java heap
     * still free, halved (ImageJ may keep a snapshot), over 4 bytes (the widest pixel); at
     * least 1.
     */
    static long heapPixels() {
        Runtime rt = Runtime.getRuntime();
        long free = rt.maxMemory() - (rt.totalMemory() - rt.freeMemory());
        return Math.max(1, Math.min(Integer.MAX_VALUE, free / 2 / 4));
    }

    /**
     * {@link #stitch(File, int, int)}, streaming the mosaic to the pyramidal OME-TIFF
     * {@code ome} ({@code omeTile}-pixel tiles) when it is over {@code maxPixels} pixels (or
     * the native 2^28), or always when {@code force}; the image is then the largest pyramid
     * level of at most {@code maxPixels} pixels.
     */
    static ImagePlus stitch(File folder, int cols, int rows, File ome, boolean force, int omeTile, long maxPixels) {
        return stitch(folder, "", cols, rows, ome, force, omeTile, maxPixels);
    }

    /**
     * {@link #stitch(File, int, int, File, boolean, int, long)} on the tiles of {@code folder}
     * that {@code names} names (a file-name pattern, {@link Native#tileNames}; empty: every
     * image file, in natural order). Names that give the channels, time points or cycles set
     * them in the options (a count the options give otherwise is an error); names that give
     * columns and rows place the tiles by them ({@code cols} and {@code rows} are then not
     * used, and a different grid is logged).
     */
    static ImagePlus stitch(File folder, String names, int cols, int rows, File ome, boolean force, int omeTile, long maxPixels) {
        long t0 = System.nanoTime();
        TileFolder tiles;
        try {
            if (names.isEmpty()) {
                // Neither this run's output nor the default one is a tile.
                tiles = TileFolder.read(folder, cols * rows * planes(), ome, new File(folder, DEFAULT_OME));
            } else {
                Options o = options();
                boolean custom = !o.get("order").equals(ORDERS[0]) || !o.get("start").equals(CORNERS[0]);
                String[] named = Native.tileNames(new File(folder, names).getPath(), o.integer("channels"), o.integer("time-points"),
                        o.integer("cycles"), custom);
                String[] head = named[0].split(" ");
                o.set("channels", Integer.parseInt(head[0])).set("time-points", Integer.parseInt(head[1])).set("cycles", Integer.parseInt(head[2]));
                int c = Integer.parseInt(head[3]), r = Integer.parseInt(head[4]);
                if (c > 0 && (c != cols || r != rows)) {
                    IJ.log("Grid: the file names give " + c + "x" + r + " tiles (not " + cols + "x" + rows + ")");
                    cols = c;
                    rows = r;
                }
                File[] files = new File[named.length - 1];
                for (int i = 1; i < named.length; i++) files[i - 1] = new File(named[i]);
                if (files.length != cols * rows * planes())
                    throw new IllegalArgumentException("the grid has " + cols * rows * planes() + " tiles, but \"" + names + "\" names " + files.length + " files");
                tiles = TileFolder.open(files);
            }
        } catch (IllegalArgumentException e) {
            Tessera.error(TITLE, e);
            return null;
        }
        final int gridCols = cols, gridRows = rows;
        IJ.showStatus("Grid: registering " + cols + "x" + rows + " tiles (Esc to cancel)...");
        GridResult g = Tessera.withProgress(TITLE,
                progress -> Native.stitchGrid(tiles.pixels, tiles.first.getWidth(), tiles.first.getHeight(), gridCols, gridRows, options().toString(),
                        ome.getPath(), force, omeTile, maxPixels, progress),
                // The steps are the pairs, then, when the mosaic is streamed, its rows.
                (done, total) -> "Grid stitching cancelled after " + done + " of " + total + " steps (no OME-TIFF left)");
        if (g == null) return null;
        double secs = (System.nanoTime() - t0) / 1e9;
        ImagePlus mosaic = g.planes == null ? Tessera.canvasImage("Grid of " + folder.getName(), tiles.first, g.pixels, g.width, g.height, g.originX, g.originY)
                : hyperstack("Grid of " + folder.getName(), tiles.first, g);
        if (g.omePath != null) describeLevel(mosaic, g);
        // With planes, the tables are of time point 1's registration channel: its block of files.
        int block = options().integer("register-channel") * cols * rows;
        File[] registered = java.util.Arrays.copyOfRange(tiles.files, block, block + cols * rows);
        ResultsTable tileTable = tileTable(g, registered), pairTable = pairTable(g, registered);
        mosaic.setProperty("TesseraTiles", tileTable);
        mosaic.setProperty("TesseraPairs", pairTable);
        tileTable.show(TILE_TABLE);
        pairTable.show(PAIR_TABLE);
        int ok = 0, accepted = 0;
        for (GridResult.Tile t : g.tiles) if (t.status.equals("ok")) ok++;
        for (GridResult.Pair p : g.pairs) if (p.accepted) accepted++;
        IJ.showStatus(String.format("Grid: %d of %d tiles registered, %d of %d pairs accepted, in %.2f s", ok, g.tiles.length, accepted,
                g.pairs.length, secs));
        return mosaic;
    }

    /** The planes the options ask for: channels times time points times cycles. */
    static int planes() {
        return options().integer("channels") * options().integer("time-points") * options().integer("cycles");
    }

    /**
     * The planes of {@code g} as a hyperstack of {@code g.channels} channels and
     * {@code g.timePoints} frames, calibrated and placed as {@link Tessera#canvasImage} does;
     * a composite image when there are several channels.
     */
    static ImagePlus hyperstack(String title, ImagePlus like, GridResult g) {
        ImagePlus first = Tessera.canvasImage(title, like, g.pixels, g.width, g.height, g.originX, g.originY);
        ij.ImageStack stack = new ij.ImageStack(g.width, g.height);
        for (int k = 0; k < g.planes.length; k++) {
            ij.process.ImageProcessor ip = first.getProcessor().createProcessor(g.width, g.height);
            ip.setPixels(g.planes[k]);
            stack.addSlice("c" + (k % g.channels + 1) + " t" + (k / g.channels + 1), ip);
        }
        ImagePlus imp = new ImagePlus(title, stack);
        imp.setDimensions(g.channels, 1, g.timePoints);
        imp.setOpenAsHyperStack(true);
        imp.setCalibration(first.getCalibration());
        if (g.channels > 1 && imp.getBitDepth() != 24) imp = new ij.CompositeImage(imp, ij.CompositeImage.COLOR);
        for (int c = 1; c <= g.channels; c++) {
            imp.setPosition(c, 1, 1);
            imp.resetDisplayRange();
        }
        imp.setPosition(1, 1, 1);
        return imp;
    }

    /**
     * Marks {@code mosaic} as pyramid level {@code g.level} of the OME-TIFF: title and Info say
     * which level and the downsampling factor f, the calibration's pixel size is f times the
     * tile's and its origin (in pixels) divided by f, and the file's path is logged.
     */
    static void describeLevel(ImagePlus mosaic, GridResult g) {
        int f = g.factor();
        String name = new File(g.omePath).getName();
        mosaic.setTitle(g.level == 0 ? name : name + " (level " + g.level + ", 1/" + f + ")");
        Calibration cal = mosaic.getCalibration().copy();
        cal.pixelWidth *= f;
        cal.pixelHeight *= f;
        cal.xOrigin /= f;
        cal.yOrigin /= f;
        mosaic.setCalibration(cal);
        String info = "Tessera grid mosaic, saved as a pyramidal OME-TIFF: " + g.omePath + "\n"
                + "Full resolution: " + g.fullWidth + " x " + g.fullHeight + " pixels\n"
                + "This image: pyramid level " + g.level + " (level 0 = full resolution), " + g.width + " x " + g.height
                + " pixels, downsampled " + f + "x" + f + " (2x2 mean per level)\n";
        mosaic.setProperty("Info", info);
        IJ.log("Grid: the " + g.fullWidth + "x" + g.fullHeight + " mosaic was saved as a pyramidal OME-TIFF: " + g.omePath
                + (g.level == 0 ? "" : "; opened level " + g.level + " (" + f + "x downsampled, " + g.width + "x" + g.height + ")"));
    }

    static ResultsTable tileTable(GridResult g, File[] files) {
        ResultsTable rt = new ResultsTable();
        for (int i = 0; i < g.tiles.length; i++) {
            GridResult.Tile t = g.tiles[i];
            rt.incrementCounter();
            rt.addLabel(files[i].getName());
            rt.addValue("Tile", i + 1);
            rt.addValue("x", t.x);
            rt.addValue("y", t.y);
            rt.addValue("Status", t.status);
            rt.addValue("Residual", t.residual);
            rt.addValue("Reason", t.status.equals("nominal") ? "no accepted pair: where the stage model puts it"
                    : t.status.equals("detached") ? "joined to the mosaic by no accepted pair: placed by the stage model"
                    : t.reason == null ? "" : t.reason);
        }
        return rt;
    }

    static ResultsTable pairTable(GridResult g, File[] files) {
        ResultsTable rt = new ResultsTable();
        for (GridResult.Pair p : g.pairs) {
            rt.incrementCounter();
            rt.addLabel(files[p.a].getName() + " - " + files[p.b].getName());
            rt.addValue("Tile A", p.a + 1);
            rt.addValue("Tile B", p.b + 1);
            rt.addValue("Status", p.accepted ? "accepted" : "rejected");
            rt.addValue("dx", p.dx);
            rt.addValue("dy", p.dy);
            rt.addValue("NCC", p.ncc);
            rt.addValue("Margin", p.margin);
            rt.addValue("Vectors", p.vectors);
            rt.addValue("Residual", p.residual);
            rt.addValue("Reason", p.reason == null ? "" : p.reason);
        }
        return rt;
    }
}
