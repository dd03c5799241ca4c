package tessera.ij;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

/**
 * The JNI entry points of the Rust library {@code libtessera_jni.so} (crate
 * {@code tessera-jni}).
 *
 * <p>Pixels are ImageJ's own arrays ({@code byte[]}, {@code short[]}, {@code float[]},
 * {@code int[]} RGB); the native side reads {@code src} and writes {@code dst} in place
 * through primitive-array critical sections, without a copy. {@code src} and {@code dst} are
 * distinct arrays of the same type holding {@code width * height} pixels.
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
    /** Border codes of the native API. */
    public static final int BORDER_REFLECT101 = 0, BORDER_REPLICATE = 1, BORDER_CONSTANT = 2, BORDER_NORMALIZE = 3;
    /** Gaussian method codes. */
    public static final int GAUSS_AUTO = 0, GAUSS_FIR = 1, GAUSS_IIR = 2;
    /** Border names in code order, for dialogs. */
    public static final String[] BORDERS = {"reflect-101", "replicate", "constant", "normalize"};

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
     * Mean over a {@code kw x kh} window anchored at {@code (kw/2, kh/2)}; integer images get
     * the exact window sum rounded half up, float the f64 sum divided; RGB per channel.
     */
    public static void meanFilter(Object src, Object dst, int width, int height, int kw, int kh,
                                  int border, float borderValue, String backend) {
        load();
        switch (kind(src, dst)) {
            case 8: meanFilter8((byte[]) src, (byte[]) dst, width, height, kw, kh, border, borderValue, backend); break;
            case 16: meanFilter16((short[]) src, (short[]) dst, width, height, kw, kh, border, borderValue, backend); break;
            case 32: meanFilter32((float[]) src, (float[]) dst, width, height, kw, kh, border, borderValue, backend); break;
            default: meanFilterRgb((int[]) src, (int[]) dst, width, height, kw, kh, border, borderValue, backend);
        }
    }

    /** Gaussian blur of standard deviation {@code sigma}; {@code radius < 0}: ceil(3 sigma). */
    public static void gaussianBlur(Object src, Object dst, int width, int height, double sigma, int radius,
                                    int method, int border, float borderValue, String backend) {
        load();
        switch (kind(src, dst)) {
            case 8: gaussianBlur8((byte[]) src, (byte[]) dst, width, height, sigma, radius, method, border, borderValue, backend); break;
            case 16: gaussianBlur16((short[]) src, (short[]) dst, width, height, sigma, radius, method, border, borderValue, backend); break;
            case 32: gaussianBlur32((float[]) src, (float[]) dst, width, height, sigma, radius, method, border, borderValue, backend); break;
            default: gaussianBlurRgb((int[]) src, (int[]) dst, width, height, sigma, radius, method, border, borderValue, backend);
        }
    }

    /** Per-frame fields of {@link #stitch}'s records. */
    public static final int REC_OK = 0, REC_X = 1, REC_Y = 2, REC_NCC = 3, REC_VECTORS = 4, REC_CONFIDENCE = 5,
            REC_QUALITY = 6, REC_QUALITY_GRID = 7, REC_FIELDS = 8;
    /** Blend codes of {@link #stitch}. */
    public static final String[] BLENDS = {"overwrite", "average", "feather"};
    /** Search method codes: the centre-biased log search, the original's plain log
     *  (three-step) search, exhaustive search. */
    public static final String[] SEARCHES = {"log", "log-plain", "exhaustive"};

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

    /** The outcome of {@link #registerPair}. */
    public static final class Pair {
        /** Moving frame's pixel (u, v) shows the reference at (u + x, v + y); NaN if skipped. */
        public final double x, y, ncc, confidence;
        public final int vectors, templates;
        public final long evaluations;
        /** Why the pair was skipped, or null. */
        public final String skip;

        Pair(double[] o, String skip) {
            x = o[1];
            y = o[2];
            ncc = o[3];
            vectors = (int) o[4];
            templates = (int) o[5];
            confidence = o[6];
            evaluations = (long) o[7];
            this.skip = skip;
        }

        public boolean ok() {
            return skip == null && !Double.isNaN(x);
        }
    }

    /**
     * Registers {@code moving} against {@code reference} (both w x h, same pixel type):
     * NPTS x NPTS templates of side rsz, each found by the search {@code method} (index into
     * {@link #SEARCHES}) within {@code radius} of the predicted shift (predX, predY), vectors below
     * {@code cthresh} dropped, the agreeing rest combined.
     */
    public static Pair registerPair(Object reference, Object moving, int w, int h, int rsz, int npts, double cthresh,
                                    int radius, double minVariance, boolean subpixel, int method,
                                    double predX, double predY, String backend) {
        load();
        double[] o = new double[8];
        String skip;
        switch (kind(reference, moving)) {
            case 8: skip = registerPair8((byte[]) reference, (byte[]) moving, w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, predX, predY, backend, o); break;
            case 16: skip = registerPair16((short[]) reference, (short[]) moving, w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, predX, predY, backend, o); break;
            case 32: skip = registerPair32((float[]) reference, (float[]) moving, w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, predX, predY, backend, o); break;
            default: skip = registerPairRgb((int[]) reference, (int[]) moving, w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, predX, predY, backend, o);
        }
        return new Pair(o, skip);
    }

    /** The outcome of {@link #stitch}. */
    public static final class Stitched {
        /** The canvas pixels (same array type as the frames), its size, and the frame-0
         *  coordinates of its pixel (0, 0). */
        public final Object pixels;
        public final int width, height, originX, originY;
        /** {@link #REC_FIELDS} values per frame (REC_OK, REC_X, ...). */
        public final double[] records;
        /** Why each frame was skipped (null where it registered). */
        public final String[] reasons;

        Stitched(Object pixels, int[] geom, double[] records, String[] reasons) {
            this.pixels = pixels;
            this.width = geom[0];
            this.height = geom[1];
            this.originX = geom[2];
            this.originY = geom[3];
            this.records = records;
            this.reasons = reasons;
        }

        public double get(int frame, int field) {
            return records[frame * REC_FIELDS + field];
        }
    }

    /**
     * Stitches a sequence (all frames w x h, one pixel type): registration of every frame
     * (frame i's position in frame-0 coordinates), then the composite with {@code blend}
     * (index into {@link #BLENDS}). The frames are copied into native memory first.
     * {@code progress} (may be null) is called after each frame; when it returns false the
     * run stops before the next frame and this throws
     * {@link java.util.concurrent.CancellationException} (nothing is composited); an
     * exception thrown by {@code progress} ends the run the same way and is rethrown here.
     */
    public static Stitched stitch(Object[] frames, int w, int h, int rsz, int npts, double cthresh, int radius,
                                  double minVariance, boolean subpixel, int method, int blend, double keyframeShift,
                                  String backend, Progress progress) {
        load();
        if (frames == null || frames.length == 0) throw new IllegalArgumentException("no frames");
        int n = frames.length;
        int[] geom = new int[4];
        double[] rec = new double[n * REC_FIELDS];
        String[] reasons = new String[n];
        Object px;
        switch (kind(frames[0], frames[0])) {
            case 8: px = stitch8(typed(frames, new byte[n][]), w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, blend, keyframeShift, backend, geom, rec, reasons, progress); break;
            case 16: px = stitch16(typed(frames, new short[n][]), w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, blend, keyframeShift, backend, geom, rec, reasons, progress); break;
            case 32: px = stitch32(typed(frames, new float[n][]), w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, blend, keyframeShift, backend, geom, rec, reasons, progress); break;
            default: px = stitchRgb(typed(frames, new int[n][]), w, h, rsz, npts, cthresh, radius, minVariance, subpixel, method, blend, keyframeShift, backend, geom, rec, reasons, progress);
        }
        return new Stitched(px, geom, rec, reasons);
    }

    /** The frames in a typed array (references only); a frame of another type is an error. */
    @SuppressWarnings("unchecked")
    private static <T> T[] typed(Object[] frames, T[] out) {
        Class<?> type = out.getClass().getComponentType();
        for (int i = 0; i < frames.length; i++) {
            if (frames[i] != null && !type.isInstance(frames[i]))
                throw new IllegalArgumentException("frame " + (i + 1) + " has another pixel type than frame 1");
            out[i] = (T) frames[i];
        }
        return out;
    }

    /** Stereo cost codes and names. */
    public static final String[] COSTS = {"census", "AD", "MI", "MI-hierarchical"};

    /**
     * Semi-global matching of a rectified pair (both 8-bit gray or both RGB, w x h) into the
     * left disparity map {@code disp} (invalid pixels: +Infinity). {@code cost} indexes
     * {@link #COSTS}; {@code paths} 4, 5, 8 or 16; {@code p1}, {@code p2} &lt; 0 take the
     * cost's defaults. Returns a one-line summary of the run.
     */
    public static String stereoSgm(Object left, Object right, float[] disp, int w, int h, int maxDisp, int cost, int paths,
                                   int p1, int p2, int uniqueness, boolean subpixel, boolean lrCheck, boolean median,
                                   boolean fill, String backend) {
        load();
        switch (kind(left, right)) {
            case 8: return stereoSgm8((byte[]) left, (byte[]) right, disp, w, h, maxDisp, cost, paths, p1, p2, uniqueness, subpixel, lrCheck, median, fill, backend);
            case 24: return stereoSgmRgb((int[]) left, (int[]) right, disp, w, h, maxDisp, cost, paths, p1, p2, uniqueness, subpixel, lrCheck, median, fill, backend);
            default: throw new IllegalArgumentException("stereo matching takes two 8-bit gray or two RGB images; convert 16-bit or 32-bit images to 8-bit first");
        }
    }

    /** Local-variance method names in code order, and kernel names. */
    public static final String[] VARIANCE_METHODS = {"usual", "koenig", "welford", "pairwise", "threewise", "recursive"};
    public static final String[] KERNELS = {"tent", "box"};

    /**
     * Local variance of {@code src} (8/16/32-bit gray, or RGB on its Rec. 601 luma) into
     * {@code dst}: the weighted variance over the tent ({@code 2^k - 1} radius) or box kernel
     * of {@code radius} around each pixel.
     */
    public static void localVariance(Object src, float[] dst, int w, int h, int method, int kernel, int radius,
                                     int border, float borderValue, String backend) {
        load();
        switch (kind(src, src)) {
            case 8: localVariance8((byte[]) src, dst, w, h, method, kernel, radius, border, borderValue, backend); break;
            case 16: localVariance16((short[]) src, dst, w, h, method, kernel, radius, border, borderValue, backend); break;
            case 32: localVariance32((float[]) src, dst, w, h, method, kernel, radius, border, borderValue, backend); break;
            default: localVarianceRgb((int[]) src, dst, w, h, method, kernel, radius, border, borderValue, backend);
        }
    }

    /** Multi-scale local contrast enhancement (tent radii {@code radii}); RGB on the luma, keeping hue. */
    public static void contrastEnhance(Object src, Object dst, int w, int h, int[] radii, float alpha, float gainMax,
                                       float gainMin, float noise, String backend) {
        load();
        switch (kind(src, dst)) {
            case 8: contrastEnhance8((byte[]) src, (byte[]) dst, w, h, radii, alpha, gainMax, gainMin, noise, backend); break;
            case 16: contrastEnhance16((short[]) src, (short[]) dst, w, h, radii, alpha, gainMax, gainMin, noise, backend); break;
            case 32: contrastEnhance32((float[]) src, (float[]) dst, w, h, radii, alpha, gainMax, gainMin, noise, backend); break;
            default: contrastEnhanceRgb((int[]) src, (int[]) dst, w, h, radii, alpha, gainMax, gainMin, noise, backend);
        }
    }

    /**
     * Highlight (glare) detection and correction: {@code mask} gets 255 on glare, 0
     * elsewhere; {@code corrected} (the type of {@code src}) the image with the glare
     * filled. Returns a one-line report.
     */
    public static String glare(Object src, byte[] mask, Object corrected, int w, int h, boolean adaptive, int[] radii,
                               float kSigma, float brightness, float minContrast, float maxSaturation, int minArea,
                               int maxArea, int grow, int fillIterations, String backend) {
        load();
        switch (kind(src, corrected)) {
            case 8: return glare8((byte[]) src, mask, (byte[]) corrected, w, h, adaptive, radii, kSigma, brightness, minContrast, maxSaturation, minArea, maxArea, grow, fillIterations, backend);
            case 16: return glare16((short[]) src, mask, (short[]) corrected, w, h, adaptive, radii, kSigma, brightness, minContrast, maxSaturation, minArea, maxArea, grow, fillIterations, backend);
            case 32: return glare32((float[]) src, mask, (float[]) corrected, w, h, adaptive, radii, kSigma, brightness, minContrast, maxSaturation, minArea, maxArea, grow, fillIterations, backend);
            default: return glareRgb((int[]) src, mask, (int[]) corrected, w, h, adaptive, radii, kSigma, brightness, minContrast, maxSaturation, minArea, maxArea, grow, fillIterations, backend);
        }
    }

    /**
     * The pixel type shared by {@code src} and {@code dst}: 8, 16, 32 or 24 (RGB). A null
     * array takes the other's type, so that the native side reports it.
     */
    static int kind(Object src, Object dst) {
        int a = kindOf(src), b = kindOf(dst);
        if (a == 0 && b == 0) throw new IllegalArgumentException("src and dst pixel arrays are both null");
        if (a < 0 || b < 0) throw new IllegalArgumentException("pixel arrays must be byte[], short[], float[] or int[] (RGB)");
        if (a != 0 && b != 0 && a != b) throw new IllegalArgumentException("src and dst pixel arrays have different types");
        return a != 0 ? a : b;
    }

    private static int kindOf(Object o) {
        if (o == null) return 0;
        if (o instanceof byte[]) return 8;
        if (o instanceof short[]) return 16;
        if (o instanceof float[]) return 32;
        if (o instanceof int[]) return 24;
        return -1;
    }

    // The typed natives (package-private so tests can hand them nulls directly).
    private static native String nativeVersion();
    static native String backendList();
    static native void panicCheck();
    static native void meanFilter8(byte[] s, byte[] d, int w, int h, int kw, int kh, int border, float bv, String backend);
    static native void meanFilter16(short[] s, short[] d, int w, int h, int kw, int kh, int border, float bv, String backend);
    static native void meanFilter32(float[] s, float[] d, int w, int h, int kw, int kh, int border, float bv, String backend);
    static native void meanFilterRgb(int[] s, int[] d, int w, int h, int kw, int kh, int border, float bv, String backend);
    static native void gaussianBlur8(byte[] s, byte[] d, int w, int h, double sigma, int radius, int method, int border, float bv, String backend);
    static native void gaussianBlur16(short[] s, short[] d, int w, int h, double sigma, int radius, int method, int border, float bv, String backend);
    static native void gaussianBlur32(float[] s, float[] d, int w, int h, double sigma, int radius, int method, int border, float bv, String backend);
    static native String registerPair8(byte[] r, byte[] m, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, double px, double py, String backend, double[] out);
    static native String registerPair16(short[] r, short[] m, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, double px, double py, String backend, double[] out);
    static native String registerPair32(float[] r, float[] m, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, double px, double py, String backend, double[] out);
    static native String registerPairRgb(int[] r, int[] m, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, double px, double py, String backend, double[] out);
    static native byte[] stitch8(byte[][] f, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, int blend, double keyframe, String backend, int[] geom, double[] rec, String[] reasons, Progress progress);
    static native short[] stitch16(short[][] f, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, int blend, double keyframe, String backend, int[] geom, double[] rec, String[] reasons, Progress progress);
    static native float[] stitch32(float[][] f, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, int blend, double keyframe, String backend, int[] geom, double[] rec, String[] reasons, Progress progress);
    static native int[] stitchRgb(int[][] f, int w, int h, int rsz, int npts, double cthresh, int radius, double minVariance, boolean subpixel, int method, int blend, double keyframe, String backend, int[] geom, double[] rec, String[] reasons, Progress progress);
    static native String stereoSgm8(byte[] l, byte[] r, float[] disp, int w, int h, int maxDisp, int cost, int paths, int p1, int p2, int uniqueness, boolean subpixel, boolean lrCheck, boolean median, boolean fill, String backend);
    static native String stereoSgmRgb(int[] l, int[] r, float[] disp, int w, int h, int maxDisp, int cost, int paths, int p1, int p2, int uniqueness, boolean subpixel, boolean lrCheck, boolean median, boolean fill, String backend);
    static native void localVariance8(byte[] s, float[] d, int w, int h, int method, int kernel, int radius, int border, float bv, String backend);
    static native void localVariance16(short[] s, float[] d, int w, int h, int method, int kernel, int radius, int border, float bv, String backend);
    static native void localVariance32(float[] s, float[] d, int w, int h, int method, int kernel, int radius, int border, float bv, String backend);
    static native void localVarianceRgb(int[] s, float[] d, int w, int h, int method, int kernel, int radius, int border, float bv, String backend);
    static native void contrastEnhance8(byte[] s, byte[] d, int w, int h, int[] radii, float alpha, float gainMax, float gainMin, float noise, String backend);
    static native void contrastEnhance16(short[] s, short[] d, int w, int h, int[] radii, float alpha, float gainMax, float gainMin, float noise, String backend);
    static native void contrastEnhance32(float[] s, float[] d, int w, int h, int[] radii, float alpha, float gainMax, float gainMin, float noise, String backend);
    static native void contrastEnhanceRgb(int[] s, int[] d, int w, int h, int[] radii, float alpha, float gainMax, float gainMin, float noise, String backend);
    static native String glare8(byte[] s, byte[] mask, byte[] c, int w, int h, boolean adaptive, int[] radii, float kSigma, float brightness, float minContrast, float maxSaturation, int minArea, int maxArea, int grow, int fillIterations, String backend);
    static native String glare16(short[] s, byte[] mask, short[] c, int w, int h, boolean adaptive, int[] radii, float kSigma, float brightness, float minContrast, float maxSaturation, int minArea, int maxArea, int grow, int fillIterations, String backend);
    static native String glare32(float[] s, byte[] mask, float[] c, int w, int h, boolean adaptive, int[] radii, float kSigma, float brightness, float minContrast, float maxSaturation, int minArea, int maxArea, int grow, int fillIterations, String backend);
    static native String glareRgb(int[] s, byte[] mask, int[] c, int w, int h, boolean adaptive, int[] radii, float kSigma, float brightness, float minContrast, float maxSaturation, int minArea, int maxArea, int grow, int fillIterations, String backend);
    static native void gaussianBlurRgb(int[] s, int[] d, int w, int h, double sigma, int radius, int method, int border, float bv, String backend);
}
