package tessera.ij;

import ij.IJ;
import ij.ImagePlus;

import java.io.File;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;

/**
 * The tiles of a grid, read from a folder: every image file in it (by extension; hidden
 * files aside) in natural order ("tile_2" before "tile_10", as the command line sorts a
 * directory), each opened by ImageJ and checked to be one gray or RGB plane of the first
 * tile's size and type. Every problem is an {@link IllegalArgumentException} naming the
 * file, so the plugin shows one clear message instead of stitching a wrong grid.
 */
final class TileFolder {
    private static final String[] EXTENSIONS = {".tif", ".tiff", ".png", ".jpg", ".jpeg", ".bmp", ".gif", ".pgm", ".ppm"};

    /** The tiles' files, in acquisition (natural) order. */
    final File[] files;
    /** The tiles' pixel arrays (ImageJ's own), in the files' order. */
    final Object[] pixels;
    /** The first tile: its size, type and calibration stand for all. */
    final ImagePlus first;

    private TileFolder(File[] files, Object[] pixels, ImagePlus first) {
        this.files = files;
        this.pixels = pixels;
        this.first = first;
    }

    /** Reads the tiles of {@code folder}; {@code expected} is the grid's tile count. */
    static TileFolder read(File folder, int expected) {
        return read(folder, expected, new File[0]);
    }

    /**
     * {@link #read(File, int)}, leaving out the files {@code outputs}: a mosaic that a previous
     * run wrote into the tile folder is not a tile.
     */
    static TileFolder read(File folder, int expected, File... outputs) {
        if (!folder.isDirectory()) throw new IllegalArgumentException("\"" + folder + "\" is not a folder");
        File[] files = imageFiles(folder);
        for (File output : outputs) {
            File out = output.getAbsoluteFile();
            files = Arrays.stream(files).filter(f -> !f.getAbsoluteFile().equals(out)).toArray(File[]::new);
        }
        if (files.length == 0) throw new IllegalArgumentException("no image files (" + String.join(" ", EXTENSIONS) + ") in " + folder);
        if (files.length != expected)
            throw new IllegalArgumentException("the grid has " + expected + " tiles, but " + folder + " holds " + files.length + " image files");
        return open(files);
    }

    /** Reads the tiles {@code files}, in that order (a file-name pattern's, {@link Native#tileNames}). */
    static TileFolder open(File[] files) {
        Object[] pixels = new Object[files.length];
        ImagePlus first = null;
        for (int i = 0; i < files.length; i++) {
            IJ.showStatus("Grid: reading tile " + (i + 1) + " of " + files.length);
            ImagePlus imp = IJ.openImage(files[i].getPath());
            if (imp == null) throw new IllegalArgumentException("ImageJ cannot open " + files[i].getName());
            if (imp.getStackSize() != 1)
                throw new IllegalArgumentException(files[i].getName() + " is a stack of " + imp.getStackSize() + " images; a tile is one image");
            if (imp.getType() == ImagePlus.COLOR_256)
                throw new IllegalArgumentException(files[i].getName() + " is 8-bit colour (LUT); convert the tiles to RGB or 8-bit gray");
            if (first == null) first = imp;
            else if (imp.getWidth() != first.getWidth() || imp.getHeight() != first.getHeight() || imp.getType() != first.getType())
                throw new IllegalArgumentException(files[i].getName() + " is " + describe(imp) + ", but " + files[0].getName() + " is "
                        + describe(first) + ": the tiles of a grid must have one size and type");
            pixels[i] = imp.getProcessor().getPixels();
        }
        return new TileFolder(files, pixels, first);
    }

    private static String describe(ImagePlus imp) {
        return imp.getWidth() + "x" + imp.getHeight() + " " + imp.getBitDepth() + "-bit";
    }

    static File[] imageFiles(File folder) {
        File[] all = folder.listFiles();
        if (all == null) throw new IllegalArgumentException("cannot list " + folder);
        List<File> images = new ArrayList<>();
        for (File f : all) if (f.isFile() && !f.getName().startsWith(".") && isImage(f.getName())) images.add(f);
        File[] out = images.toArray(new File[0]);
        Arrays.sort(out, Comparator.comparing(File::getName, TileFolder::natural));
        return out;
    }

    private static boolean isImage(String name) {
        String n = name.toLowerCase(Locale.ROOT);
        for (String e : EXTENSIONS) if (n.endsWith(e)) return true;
        return false;
    }

    /** Natural order: runs of digits compare as numbers, the rest character by character. */
    static int natural(String a, String b) {
        int i = 0, j = 0;
        while (i < a.length() && j < b.length()) {
            char x = a.charAt(i), y = b.charAt(j);
            if (Character.isDigit(x) && Character.isDigit(y)) {
                int i1 = i, j1 = j;
                while (i1 < a.length() && Character.isDigit(a.charAt(i1))) i1++;
                while (j1 < b.length() && Character.isDigit(b.charAt(j1))) j1++;
                String na = a.substring(i, i1).replaceFirst("^0+(?=.)", ""), nb = b.substring(j, j1).replaceFirst("^0+(?=.)", "");
                int c = na.length() != nb.length() ? Integer.compare(na.length(), nb.length()) : na.compareTo(nb);
                if (c != 0) return c;
                i = i1;
                j = j1;
            } else {
                if (x != y) return Character.compare(x, y);
                i++;
                j++;
            }
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }
}
