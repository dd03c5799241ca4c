package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.plugin.filter.GaussianBlur;
import ij.plugin.filter.RankFilters;
import ij.process.FloatProcessor;

import java.util.Arrays;
import java.util.Random;

/**
 * Quick timings (not a test): the JNI call overhead, and the plugin against ImageJ's own
 * filters on the same 1920x1080 image in the same JVM. Run by imagej-plugin/bench.sh;
 * prints JSON lines. Medians of several runs after a warm-up.
 */
public final class JniBench {
    private static double medianMs(Runnable r, int n) {
        for (int i = 0; i < 2; i++) r.run();
        double[] t = new double[n];
        for (int i = 0; i < n; i++) {
            long a = System.nanoTime();
            r.run();
            t[i] = (System.nanoTime() - a) / 1e6;
        }
        Arrays.sort(t);
        return t[n / 2];
    }

    private static void print(String name, String params, double ms) {
        System.out.printf("{\"name\": \"%s\", \"params\": {%s}, \"median_ms\": %.4f}%n", name, params, ms);
    }

    public static void main(String[] args) throws Exception {
        IjHeadless.setUp();
        String backend = args.length > 0 ? args[0] : "cpu";
        System.out.println("# " + Native.version() + ", backend " + backend + ", " + Runtime.getRuntime().availableProcessors() + " CPUs");

        // 1. The fixed cost of one native call: a 1-pixel mean filter (validation, backend
        //    lookup, two critical sections, the exception-policy wrapper).
        byte[] one = {7}, oneOut = new byte[1];
        int calls = 200_000;
        double perCall = medianMs(() -> {
            for (int i = 0; i < calls; i++) Native.meanFilter8(one, oneOut, 1, 1, 1, 1, 0, 0f, backend);
        }, 5) / calls;
        print("jni_call_1px", "\"op\": \"mean\"", perCall);

        int w = 1920, h = 1080;
        Random rnd = new Random(0);
        FloatProcessor hd = new FloatProcessor(w, h);
        float[] p = (float[]) hd.getPixels();
        for (int i = 0; i < p.length; i++) p[i] = rnd.nextInt(256);
        byte[] p8 = new byte[w * h], o8 = new byte[w * h];
        for (int i = 0; i < p8.length; i++) p8[i] = (byte) p[i];
        float[] o32 = new float[w * h];

        // 2. Whole-image operations through JNI (src -> dst arrays, no copy).
        print("jni_mean_u8", "\"w\": 1920, \"h\": 1080, \"m\": 15", medianMs(() -> Native.meanFilter8(p8, o8, w, h, 15, 15, 0, 0f, backend), 15));
        print("jni_mean_f32", "\"w\": 1920, \"h\": 1080, \"m\": 15", medianMs(() -> Native.meanFilter32(p, o32, w, h, 15, 15, 0, 0f, backend), 15));
        String gaussErr = null;
        try {
            Native.gaussianBlur32(p, o32, w, h, 2, -1, 0, 0, 0f, backend);
        } catch (RuntimeException e) {
            gaussErr = e.getMessage();
        }
        if (gaussErr == null) {
            print("jni_gauss_f32", "\"w\": 1920, \"h\": 1080, \"sigma\": 2", medianMs(() -> Native.gaussianBlur32(p, o32, w, h, 2, -1, 0, 0, 0f, backend), 15));
            print("jni_gauss_u8", "\"w\": 1920, \"h\": 1080, \"sigma\": 2", medianMs(() -> Native.gaussianBlur8(p8, o8, w, h, 2, -1, 0, 0, 0f, backend), 15));
            // The menu command as a user runs it (snapshot for Undo + native call).
            ImagePlus imp = new ImagePlus("hd", hd.duplicate());
            print("plugin_gauss_f32", "\"w\": 1920, \"h\": 1080, \"sigma\": 2", medianMs(() -> IJ.run(imp, "Gaussian Blur (Tessera)...",
                    "sigma=2 method=auto border=reflect-101 value=0 backend=" + backend), 9));
        } else {
            System.out.println("# gaussian through JNI unavailable: " + gaussErr);
        }
        ImagePlus impMean = new ImagePlus("hd", hd.duplicate());
        print("plugin_mean_f32", "\"w\": 1920, \"h\": 1080, \"m\": 15", medianMs(() -> IJ.run(impMean, "Mean / Box Filter...",
                "width=15 height=15 border=reflect-101 value=0 backend=" + backend), 9));

        // 3. ImageJ's own filters on the same image, same JVM (in place on a copy made
        //    once, so no allocation is timed; ImageJ's own anchor times a duplicate too).
        GaussianBlur gb = new GaussianBlur();
        FloatProcessor work = (FloatProcessor) hd.duplicate();
        print("imagej_gauss_f32", "\"w\": 1920, \"h\": 1080, \"sigma\": 2", medianMs(() -> gb.blurGaussian(work, 2, 2, 0.002), 9));
        RankFilters rf = new RankFilters();
        print("imagej_mean_circular_f32", "\"w\": 1920, \"h\": 1080, \"radius\": 7", medianMs(() -> rf.rank(work, 7, RankFilters.MEAN), 5));
        System.exit(0);
    }
}
