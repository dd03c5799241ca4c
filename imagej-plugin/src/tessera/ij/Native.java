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
 * boundary and thrown as {@link IllegalStateException}. If the library itself cannot be
 * loaded every call throws {@link IllegalStateException} saying why.
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
    static native void gaussianBlurRgb(int[] s, int[] d, int w, int h, double sigma, int radius, int method, int border, float bv, String backend);
}
