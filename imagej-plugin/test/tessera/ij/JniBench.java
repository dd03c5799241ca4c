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
        String identity = "width=1 height=1 backend=" + backend; // built once, as a plugin does per run
        double perCall = medianMs(() -> {
            for (int i = 0; i < calls; i++) Native.meanFilter(one, oneOut, 1, 1, identity);
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
        print("jni_mean_u8", "\"w\": 1920, \"h\": 1080, \"m\": 15", medianMs(() -> Native.meanFilter(p8, o8, w, h, "width=15 height=15 backend=" + backend), 15));
        print("jni_mean_f32", "\"w\": 1920, \"h\": 1080, \"m\": 15", medianMs(() -> Native.meanFilter(p, o32, w, h, "width=15 height=15 backend=" + backend), 15));
        String gaussErr = null;
        try {
            Native.gaussianBlur(p, o32, w, h, "sigma=2 backend=" + backend);
        } catch (RuntimeException e) {
            gaussErr = e.getMessage();
        }
        if (gaussErr == null) {
            print("jni_gauss_f32", "\"w\": 1920, \"h\": 1080, \"sigma\": 2", medianMs(() -> Native.gaussianBlur(p, o32, w, h, "sigma=2 backend=" + backend), 15));
            print("jni_gauss_u8", "\"w\": 1920, \"h\": 1080, \"sigma\": 2", medianMs(() -> Native.gaussianBlur(p8, o8, w, h, "sigma=2 backend=" + backend), 15));
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

        // Local variance, box radius 63, exact recursive method: through JNI and the menu.
        String varErr = null;
        try {
            Native.localVariance(p, o32, w, h, "method=recursive kernel=box radius=63 backend=" + backend);
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            varErr = e.getMessage();
        }
        if (varErr == null) {
            print("jni_variance_box63_f32", "\"w\": 1920, \"h\": 1080, \"radius\": 63", medianMs(() -> Native.localVariance(p, o32, w, h, "method=recursive kernel=box radius=63 backend=" + backend), 9));
            print("jni_variance_box63_u8", "\"w\": 1920, \"h\": 1080, \"radius\": 63", medianMs(() -> Native.localVariance(p8, o32, w, h, "method=recursive kernel=box radius=63 backend=" + backend), 9));
        } else {
            System.out.println("# local variance through JNI unavailable: " + varErr);
        }

        // 3. ImageJ's own filters on the same image, same JVM (in place on a copy made
        //    once, so no allocation is timed; ImageJ's own anchor times a duplicate too).
        GaussianBlur gb = new GaussianBlur();
        FloatProcessor work = (FloatProcessor) hd.duplicate();
        print("imagej_gauss_f32", "\"w\": 1920, \"h\": 1080, \"sigma\": 2", medianMs(() -> gb.blurGaussian(work, 2, 2, 0.002), 9));
        RankFilters rf = new RankFilters();
        print("imagej_mean_circular_f32", "\"w\": 1920, \"h\": 1080, \"radius\": 7", medianMs(() -> rf.rank(work, 7, RankFilters.MEAN), 5));
        if (varErr == null) {
            ij.process.ByteProcessor b8 = new ij.process.ByteProcessor(w, h, p8.clone());
            print("imagej_variance_circular_u8", "\"w\": 1920, \"h\": 1080, \"radius\": 63", medianMs(() -> rf.rank(b8, 63, RankFilters.VARIANCE), 3));
        }
        if (varErr == null)
            print("imagej_variance_circular_f32", "\"w\": 1920, \"h\": 1080, \"radius\": 63", medianMs(() -> rf.rank(work, 63, RankFilters.VARIANCE), 3));

        // 4. The panorama registration, Java vs native (Benchmark...'s measurement), on a
        //    half-PAL sweep (360x288 frames) cut from the cones photograph scaled 2x.
        try {
            ij.process.ImageProcessor big = IjHeadless.open("stereo/cones/im2.png").getProcessor().convertToByteProcessor(false).resize(900, 750);
            ij.ImageStack st = new ij.ImageStack(360, 288);
            int frames = 50;
            for (int i = 0; i < frames; i++) {
                big.setRoi(10 + i * 500 / (frames - 1), 10 + (int) Math.round(i * 420.0 / (frames - 1) + 5 * Math.sin(i)), 360, 288);
                st.addSlice(big.crop());
            }
            ij.measure.ResultsTable rt = BenchmarkPlugin.benchmark(new ImagePlus("sweep", st), 25, 6, 0.85, 32, 3);
            for (int i = 0; i < rt.size(); i++) {
                if (Double.isNaN(rt.getValue("Time (ms)", i))) continue;
                System.out.printf("{\"name\": \"register_sequence_%s\", \"params\": {\"frames\": %d, \"w\": 360, \"h\": 288, \"rsz\": 25, \"npts\": 6, \"radius\": 32}, \"best_of_3_ms\": %.3f, \"pairs_per_s\": %.1f, \"speedup_vs_java\": %.2f, \"evaluations\": %.0f, \"max_diff_px\": %.3f, \"registered\": %.0f}%n",
                        rt.getStringValue("Backend", i), frames, rt.getValue("Time (ms)", i), rt.getValue("Frame pairs/s", i),
                        rt.getValue("Speed-up vs Java", i), rt.getValue("NCC evaluations", i), rt.getValue("Max |position - Java| (px)", i), rt.getValue("Frames registered", i));
            }
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            System.out.println("# panorama benchmark unavailable: " + e);
        }
        System.exit(0);
    }
}
