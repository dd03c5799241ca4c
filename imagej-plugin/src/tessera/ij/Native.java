package tessera.ij;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.Map;

/**
 * The JNI entry points of the Rust library {@code libtessera_jni.so} (crate
 * {@code tessera-jni}).
 *
 * <p>One method per operation. Pixels are ImageJ's own arrays ({@code byte[]},
 * {@code short[]}, {@code float[]}, {@code int[]} RGB), passed as {@code Object}: the native
 * side reads the type from the array, reads {@code src} and writes {@code dst} in place
 * through primitive-array critical sections, without a copy. {@code src} and {@code dst} are
 * distinct arrays of the same type holding {@code width * height} pixels.
 *
 * <p>Parameters are one options string per call, in the ImageJ macro style and with the
 * names of the {@code tessera} command-line program's options, e.g.
 * {@code "rsz=25 npts=6 cthresh=0.85 blend=feather backend=cpu"} (see {@link Options}); a key
 * left out keeps the core's default, which {@link #defaults} lists; {@code backend} is
 * {@code cpu}, {@code cuda} or {@code auto} (the default). The string is parsed and
 * validated once, natively: an unknown key or a bad value is an
 * {@link IllegalArgumentException} naming the key. Results come back as objects with named
 * fields ({@link PairResult}, {@link StitchResult}, {@link GridResult}, {@link StereoResult},
 * {@link GlareResult}).
 *
 * <p>Errors: bad input throws {@link IllegalArgumentException}, a missing backend
 * {@link IllegalStateException}, both with the core's message; a Rust panic is caught at the
 * boundary and thrown as {@link IllegalStateException}; a run stopped by its progress
 * callback throws {@link java.util.concurrent.CancellationException} (a subclass of
 * IllegalStateException: catch it first). If the library itself cannot be loaded every
 * call throws {@link IllegalStateException} saying why.
 *
 * <p>Where the library comes from, first found wins: the system property
 * {@code tessera.jni.library} (a path), {@code lib/linux64/libtessera_jni.so} in the
 * ImageJ / Fiji folder, {@code tessera_jni} on {@code java.library.path}, and last the copy
 * bundled inside {@code Tessera_.jar} (extracted to a temporary file).
 */
public final class Native {
    private static final String LIB = "tessera_jni";
    private static final String BUNDLED = "/native/linux-x86_64/libtessera_jni.so";

    private static String loadedFrom;
    private static Throwable loadError;

    private Native() {}

    /** Loads the library once; later calls return at once. */
    public static synchronized void load() {
        if (loadedFrom != null) return;
        if (loadError != null) throw unavailable();
        try {
            loadedFrom = locateAndLoad();
        } catch (Throwable t) {
            loadError = t;
            throw unavailable();
        }
    }

    /** Where the native library was loaded from (a path, or "java.library.path"). */
    public static String libraryPath() {
        load();
        return loadedFrom;
    }

    private static IllegalStateException unavailable() {
        return new IllegalStateException("the tessera native library could not be loaded: " + loadError, loadError);
    }

    private static String locateAndLoad() throws IOException {
        String prop = System.getProperty("tessera.jni.library");
        if (prop != null && !prop.isEmpty()) {
            System.load(new File(prop).getAbsolutePath());
            return prop;
        }
        String ijDir = System.getProperty("ij.dir", System.getProperty("user.dir"));
        File fiji = new File(new File(new File(ijDir, "lib"), "linux64"), "lib" + LIB + ".so");
        if (fiji.isFile()) {
            System.load(fiji.getAbsolutePath());
            return fiji.getPath();
        }
        try {
            System.loadLibrary(LIB);
            return "java.library.path";
        } catch (UnsatisfiedLinkError notOnPath) {
            // fall through to the copy inside the jar
        }
        String os = System.getProperty("os.name", "").toLowerCase();
        String arch = System.getProperty("os.arch", "");
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64")))
            throw new UnsatisfiedLinkError("Tessera_.jar bundles the native library for linux-x86_64 only (this is "
                    + os + "-" + arch + "); put lib" + LIB + " on java.library.path");
        try (InputStream in = Native.class.getResourceAsStream(BUNDLED)) {
            if (in == null) throw new UnsatisfiedLinkError(BUNDLED + " is missing from the jar");
            File tmp = File.createTempFile("libtessera_jni", ".so");
            tmp.deleteOnExit();
            Files.copy(in, tmp.toPath(), StandardCopyOption.REPLACE_EXISTING);
            System.load(tmp.getAbsolutePath());
            return tmp.getPath() + " (extracted from the jar)";
        }
    }

    /** "tessera-jni VERSION (ARCH, CPU FEATURES)". */
    public static String version() {
        load();
        return nativeVersion();
    }

    /** The backends usable here: {"cpu"} or {"cpu", "cuda"}. */
    public static String[] backends() {
        load();
        return backendList().split(",");
    }

    /** True when {@code name} is among {@link #backends()}. */
    public static boolean hasBackend(String name) {
        for (String b : backends()) if (b.equals(name)) return true;
        return false;
    }

    /**
     * The options of operation {@code op} ({@code mean}, {@code gauss}, {@code variance},
     * {@code contrast}, {@code glare}, {@code register}, {@code stitch}, {@code grid}, {@code stereo}) at
     * the native core's defaults, in the operation's order, e.g. {@code rsz -> 25} for
     * {@code stitch}: the one place the defaults are written is the Rust parameter structs.
     */
    public static Map<String, String> defaults(String op) {
        load();
        return nativeDefaults(op);
    }

    /**
     * Mean over a {@code width x height} window anchored at its centre; integer images get
     * the exact window sum rounded half up, float the f64 sum divided; RGB per channel.
     * Options: {@code width height border} ({@code reflect101}, {@code replicate},
     * {@code normalize}, {@code constant:V}).
     */
    public static void meanFilter(Object src, Object dst, int width, int height, String options) {
        load();
        nativeMeanFilter(src, dst, width, height, options);
    }

    /** Gaussian blur. Options: {@code sigma radius} ({@code auto}: ceil(3 sigma)) {@code method}
     *  ({@code auto}, {@code fir}, {@code iir}) {@code border}. */
    public static void gaussianBlur(Object src, Object dst, int width, int height, String options) {
        load();
        nativeGaussianBlur(src, dst, width, height, options);
    }

    /**
     * Local variance of {@code src} (8/16/32-bit gray, or RGB on its Rec. 601 luma) into
     * {@code dst}: the weighted variance over the kernel around each pixel. Options:
     * {@code method} (usual, koenig, welford, pairwise, threewise, recursive) {@code kernel}
     * (tent: radius 2^k - 1, or box) {@code radius border}.
     */
    public static void localVariance(Object src, float[] dst, int width, int height, String options) {
        load();
        nativeLocalVariance(src, dst, width, height, options);
    }

    /** Multi-scale local contrast enhancement; RGB on the luma, keeping hue. Options:
     *  {@code radii} (tent, comma-separated) {@code alpha gain-max gain-min noise border}. */
    public static void contrastEnhance(Object src, Object dst, int width, int height, String options) {
        load();
        nativeContrastEnhance(src, dst, width, height, options);
    }

    /**
     * Highlight (glare) detection and correction: {@code mask} gets 255 on glare, 0
     * elsewhere; {@code corrected} (the type of {@code src}) the image with the glare
     * filled. Options: {@code mode} (adaptive, manual) {@code radii k-sigma brightness
     * min-contrast max-saturation min-area max-area max-elongation grow fill-grow
     * fill-iterations border}.
     */
    public static GlareResult glare(Object src, byte[] mask, Object corrected, int width, int height, String options) {
        load();
        return nativeGlare(src, mask, corrected, width, height, options);
    }

    /**
     * Receives the progress of a long native call and may stop it. Called on the thread that
     * made the call, after each frame: {@code done} frames of {@code total} are done.
     */
    public interface Progress {
        /** Returns true to go on, false to cancel the run (the call then throws
         *  {@link java.util.concurrent.CancellationException}). An exception thrown here
         *  also ends the run, and the call rethrows it. */
        boolean progress(int done, int total);
    }

    /**
     * Registers {@code moving} against {@code reference} (both w x h, same pixel type):
     * NPTS x NPTS templates of side rsz, each found by the search {@code method} within the
     * search radius of the predicted shift (predX, predY), each vector kept if it passes the
     * {@code accept} rule (adaptive: its peak beats the template's null sample by
     * {@code null-margin}; fixed: at least {@code cthresh}), the agreeing rest combined.
     * Options: {@code rsz accept cthresh null-margin min-coefficient npts search-radius
     * min-variance method} (log, log-plain, exhaustive) {@code subpixel refine motion}
     * (similarity: rotation too, where the pair shows a significant one; translation)
     * {@code fit-scale max-turn} (degrees). The result's (x, y, angle, scale) is the pair's
     * motion ({@link PairResult#x}).
     */
    public static PairResult registerPair(Object reference, Object moving, int w, int h, double predX, double predY,
                                          String options) {
        load();
        return nativeRegisterPair(reference, moving, w, h, predX, predY, options);
    }

    /**
     * Stitches a sequence (all frames w x h, one pixel type): registration of every frame
     * (frame i's position in frame-0 coordinates), then the composite. Options: those of
     * {@link #registerPair}, {@code blend} (overwrite, average, feather),
     * {@code keyframe-shift}, {@code coarse} (phase-correlation seeds for failed or weak
     * pairs), {@code grow} (retry weak pairs with templates of twice the side) and
     * {@code loops} (register frames that come back over earlier ones against them too, and
     * solve all positions together). The frames are copied into native memory first.
     * {@code progress} (may be null) is called after each frame; when it returns false the
     * run stops before the next frame and this throws
     * {@link java.util.concurrent.CancellationException} (nothing is composited); an
     * exception thrown by {@code progress} ends the run the same way and is rethrown here.
     */
    public static StitchResult stitch(Object[] frames, int w, int h, String options, Progress progress) {
        load();
        return nativeStitch(frames, w, h, options, progress);
    }

    /**
     * Stitches a tile grid: {@code cols * rows} tiles (all w x h, one pixel type) in
     * acquisition order, laid out by the options {@code overlap} (percent of a tile),
     * {@code order} (row, column, snake-row, snake-column) and {@code start} (top-left,
     * top-right, bottom-left, bottom-right). Every neighbouring pair is registered from its
     * nominal offset (options of {@link #registerPair}, {@code stage-error}: how far, as a
     * fraction of a tile, a tile may be off its stage position, and {@code coarse}:
     * phase-correlation seeds), all positions are solved together, and the tiles composited
     * with {@code blend}; on the CPU core whatever {@code backend} says. The tiles are
     * copied into native memory first. {@code progress} (may be null) is called before each
     * pair and after the last with the pairs done of all; returning false cancels the run
     * ({@link java.util.concurrent.CancellationException}); an exception it throws ends the
     * run and is rethrown here. A mosaic of more than 2^28 pixels is an
     * {@link IllegalArgumentException} that prints the command line (see the overload that
     * streams it to an OME-TIFF).
     */
    public static GridResult stitchGrid(Object[] tiles, int w, int h, int cols, int rows, String options, Progress progress) {
        return stitchGrid(tiles, w, h, cols, rows, options, null, false, 512, 0, progress);
    }

    /**
     * {@link #stitchGrid(Object[], int, int, int, int, String, Progress)}, and a mosaic of more
     * than {@code maxPixels} pixels (0: no bound but the native 2^28), or any mosaic when
     * {@code force}, is composited in strips and streamed to the tiled, pyramidal OME-TIFF
     * {@code ome} (tiles of {@code omeTile} pixels, a multiple of 16 from 16 to 4096; each
     * level the previous halved by a 2x2 mean), as {@code tessera stitch --grid ... -o
     * FILE.ome.tif} does; the result then holds the largest pyramid level of at most
     * {@code maxPixels} pixels ({@link GridResult#level}, {@link GridResult#omePath}).
     * {@code progress} then also follows the mosaic's rows as they are written. A file that
     * cannot be written is an {@link IllegalArgumentException}; a cancelled or failed run
     * removes the incomplete file. {@code ome} null: never streamed.
     */
    public static GridResult stitchGrid(Object[] tiles, int w, int h, int cols, int rows, String options, String ome, boolean force,
                                        int omeTile, long maxPixels, Progress progress) {
        load();
        return nativeStitchGrid(tiles, w, h, cols, rows, options, ome, force, omeTile, maxPixels, progress);
    }

    /**
     * The tiles a file-name pattern names ({@code /data/scan/img_r{yy}_c{xx}_ch{c}.tif}: fields
     * {@code {x}} column, {@code {y}} row, {@code {i}} tile, {@code {c}} channel, {@code {t}}
     * time point or cycle, repeated letters for fixed digits, {@code *} any text), as the
     * command line reads them. Element 0 is {@code "C T K COLS ROWS"}: the run's channels,
     * time points and cycles (the names' counts; {@code channels}, {@code timePoints},
     * {@code cycles} are those the dialog gives, 1 meaning not given, and must agree), and the
     * grid where the names give columns and rows ({@code 0 0} otherwise); then the files in
     * the grid's order (time point by time point, channel by channel, tile by tile).
     * {@code customOrder}: an acquisition order or start corner other than the default is
     * asked for, which names that place each tile refuse. A bad pattern, no file, a missing
     * tile or counts that disagree are an {@link IllegalArgumentException}.
     */
    public static String[] tileNames(String pattern, int channels, int timePoints, int cycles, boolean customOrder) {
        load();
        return nativeTileNames(pattern, channels, timePoints, cycles, customOrder);
    }

    /**
     * Semi-global matching of a rectified pair (both 8-bit gray or both RGB, w x h) into the
     * left disparity map {@code disp} (invalid pixels: +Infinity). Options: {@code max-disp
     * cost} (census, ad, mi, mi-hierarchical) {@code paths} (4, 5, 8, 16) {@code p1 p2}
     * ({@code auto}: the cost's defaults) {@code fixed-p2 uniqueness subpixel lr-check median
     * fill}.
     */
    public static StereoResult stereoSgm(Object left, Object right, float[] disp, int w, int h, String options) {
        load();
        return nativeStereoSgm(left, right, disp, w, h, options);
    }

    private static native String nativeVersion();
    static native String backendList();
    static native void panicCheck();
    private static native Map<String, String> nativeDefaults(String op);
    private static native void nativeMeanFilter(Object src, Object dst, int w, int h, String options);
    private static native void nativeGaussianBlur(Object src, Object dst, int w, int h, String options);
    private static native void nativeLocalVariance(Object src, float[] dst, int w, int h, String options);
    private static native void nativeContrastEnhance(Object src, Object dst, int w, int h, String options);
    private static native GlareResult nativeGlare(Object src, byte[] mask, Object corrected, int w, int h, String options);
    private static native PairResult nativeRegisterPair(Object reference, Object moving, int w, int h, double predX,
                                                        double predY, String options);
    private static native StitchResult nativeStitch(Object[] frames, int w, int h, String options, Progress progress);
    private static native GridResult nativeStitchGrid(Object[] tiles, int w, int h, int cols, int rows, String options,
                                                      String ome, boolean force, int omeTile, long maxPixels, Progress progress);
    private static native String[] nativeTileNames(String pattern, int channels, int timePoints, int cycles, boolean customOrder);
    private static native StereoResult nativeStereoSgm(Object left, Object right, float[] disp, int w, int h, String options);
}
