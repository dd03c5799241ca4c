package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.measure.ResultsTable;
import ij.plugin.PlugIn;

import java.util.Arrays;
import java.util.concurrent.CancellationException;

/**
 * Plugins &gt; Tessera &gt; Benchmark...: the original project's Java -&gt; C -&gt; CUDA study on
 * the current stack. The same sequence registration (every frame against the last
 * registered one, the search starting from the previous shift, NPTS x NPTS templates of
 * side rsz, the plain NCC log (three-step) search, integer peaks) runs with the pure-Java matcher
 * ({@link JavaNcc}, the original plugin's way), then with the native one on each available
 * backend ({@code cpu}, {@code cuda}); a Results table "Tessera benchmark" gives the times,
 * frames per second, the speed-up over Java, the NCC evaluations and how far each backend's
 * positions are from Java's.
 *
 * <p>What differs between the two matchers besides the language: the native pair
 * registration skips flat templates (variance below 4) and combines the vectors by
 * consensus (agreeing within 1 px), the Java one takes the median of the vectors above
 * cthresh; both place the same grid and search the same way. Java's time excludes the one
 * conversion of the frames to float; the native time includes copying each frame pair into
 * native memory. Esc cancels between frames (no table is made).
 * Macro: {@code run("Benchmark...", "rsz=25 cthresh=0.85 npts=6 radius=16 repeats=3")}.
 */
public class BenchmarkPlugin implements PlugIn {
    static final String TITLE = "Benchmark", TABLE = "Tessera benchmark";
    /** The benchmark's own choices, not the stitching defaults: a search radius of 16
     *  (a short sweep's steps) and the best of 3 runs. rsz, NPTS and cthresh start at the
     *  native registration defaults. */
    private static int radius = 16, repeats = 3;
    private static Options last;

    @Override
    public void run(String arg) {
        ImagePlus imp = IJ.getImage();
        if (imp == null) return;
        if (imp.getStackSize() < 2) {
            Tessera.error(TITLE, "Benchmark registers a sequence: it needs a stack of at least 2 frames; \""
                    + imp.getTitle() + "\" has " + imp.getStackSize() + " slice.");
            return;
        }
        try {
            if (last == null) last = Options.defaults("register");
        } catch (RuntimeException e) {
            Tessera.error(TITLE, e);
            return;
        }
        Params gd = new Params(TITLE);
        gd.addMessage("Registers the stack with pure Java, then natively on every backend.");
        gd.addNumber("rsz (template side)", last.integer("rsz"), 0, "pixels");
        gd.addNumber("cthresh (NCC threshold)", last.number("cthresh"), 2, "");
        gd.addNumber("NPTS (templates per side)", last.integer("npts"), 0, "");
        gd.addNumber("Radius (search)", radius, 0, "pixels");
        gd.addNumber("Repeats", repeats, 0, "(the fastest run counts)");
        if (!gd.show()) return;
        try {
            double r = gd.nextNumber(), c = gd.nextNumber(), n = gd.nextNumber(), rad = gd.nextNumber(), rep = gd.nextNumber();
            if (gd.invalidNumber() || r != Math.rint(r) || n != Math.rint(n) || rad != Math.rint(rad) || rep != Math.rint(rep) || rep < 1)
                throw new IllegalArgumentException("rsz, NPTS, the search radius and the repeats must be whole numbers (repeats >= 1)");
            last.set("rsz", (int) r).set("cthresh", c).set("npts", (int) n);
            radius = (int) rad;
            repeats = (int) rep;
            ResultsTable rt = benchmark(imp, (int) r, (int) n, c, radius, repeats);
            rt.show(TABLE);
        } catch (CancellationException e) {
            IJ.resetEscape();
            IJ.showProgress(1.0);
            IJ.showStatus("Benchmark cancelled");
        } catch (RuntimeException e) {
            Tessera.error(TITLE, e);
        }
    }

    /** Positions (x, y per frame, NaN when skipped), evaluations and time of one run. */
    private static final class Run {
        double[] x, y;
        long evaluations;
        double ms = Double.POSITIVE_INFINITY;
        int registered;
    }

    static Run java(float[][] frames, int w, int h, int rsz, int npts, double cthresh, int radius) {
        Run r = new Run();
        long t0 = System.nanoTime();
        JavaNcc.FramePosition[] p = JavaNcc.registerSequence(frames, w, h, rsz, npts, cthresh, radius, IJ::escapePressed);
        r.ms = (System.nanoTime() - t0) / 1e6;
        r.x = new double[p.length];
        r.y = new double[p.length];
        for (int i = 0; i < p.length; i++) {
            r.x[i] = p[i].x;
            r.y[i] = p[i].y;
            r.evaluations += p[i].evaluations;
            if (p[i].ok()) r.registered++;
        }
        return r;
    }

    /** The same chain as {@link JavaNcc#registerSequence}, each pair registered natively. */
    static Run nativeRun(Object[] frames, int w, int h, int rsz, int npts, double cthresh, int radius, String backend) {
        // The Java matcher's search: the plain log search, integer peaks, shifts only (the
        // positions chain by adding shifts); the rest (the variance floor) at the native
        // defaults.
        String options = Options.defaults("register").set("rsz", rsz).set("npts", npts).set("cthresh", cthresh)
                .set("search-radius", radius).set("method", "log-plain").set("subpixel", false).set("motion", "translation")
                .set("backend", backend).toString();
        Run r = new Run();
        int n = frames.length;
        r.x = new double[n];
        r.y = new double[n];
        long t0 = System.nanoTime();
        int ref = 0;
        double px = 0, py = 0;
        r.registered = 1;
        for (int i = 1; i < n; i++) {
            if (IJ.escapePressed()) throw new CancellationException("stopped by Esc");
            PairResult p = Native.registerPair(frames[ref], frames[i], w, h, px, py, options);
            r.evaluations += p.evaluations;
            if (!p.ok) {
                r.x[i] = r.y[i] = Double.NaN;
                continue;
            }
            r.x[i] = r.x[ref] + p.x;
            r.y[i] = r.y[ref] + p.y;
            px = p.x;
            py = p.y;
            ref = i;
            r.registered++;
        }
        r.ms = (System.nanoTime() - t0) / 1e6;
        return r;
    }

    /** Runs every matcher {@code repeats} times and tabulates the fastest run of each. */
    static ResultsTable benchmark(ImagePlus imp, int rsz, int npts, double cthresh, int radius, int repeats) {
        ImageStack st = imp.getStack();
        int n = st.getSize(), w = st.getWidth(), h = st.getHeight();
        Object[] frames = new Object[n];
        float[][] gray = new float[n][];
        for (int i = 0; i < n; i++) {
            frames[i] = st.getPixels(i + 1);
            gray[i] = Gray.of(frames[i]);
        }
        String[] names = {"java", "cpu", "cuda"};
        Run[] best = new Run[names.length];
        String[] missing = new String[names.length];
        int steps = repeats * names.length, step = 0;
        for (int k = 0; k < names.length; k++) {
            if (k > 0 && !Native.hasBackend(names[k])) {
                missing[k] = "no " + names[k].toUpperCase() + " backend here";
                continue;
            }
            for (int rep = 0; rep < repeats; rep++) {
                if (IJ.escapePressed()) throw new CancellationException("stopped by Esc");
                IJ.showStatus("Benchmark: " + names[k] + " run " + (rep + 1) + " of " + repeats);
                Run r = k == 0 ? java(gray, w, h, rsz, npts, cthresh, radius)
                        : nativeRun(frames, w, h, rsz, npts, cthresh, radius, names[k]);
                if (best[k] == null || r.ms < best[k].ms) best[k] = r;
                IJ.showProgress(++step, steps);
            }
        }
        IJ.showProgress(1.0);
        ResultsTable rt = new ResultsTable();
        double javaMs = best[0].ms;
        for (int k = 0; k < names.length; k++) {
            rt.incrementCounter();
            rt.addValue("Backend", names[k]);
            if (best[k] == null) {
                rt.addValue("Time (ms)", Double.NaN);
                rt.addValue("Note", missing[k]);
                continue;
            }
            Run r = best[k];
            rt.addValue("Time (ms)", r.ms);
            rt.addValue("Frame pairs/s", (n - 1) / (r.ms / 1000));
            rt.addValue("Speed-up vs Java", javaMs / r.ms);
            rt.addValue("NCC evaluations", r.evaluations);
            rt.addValue("Frames registered", r.registered);
            rt.addValue("Max |position - Java| (px)", maxDiff(r, best[0]));
            rt.addValue("Note", k == 0 ? "pure Java (the original plugin's way)" : "native " + names[k]);
        }
        IJ.showStatus(String.format("Benchmark: java %.1f ms, cpu %.1f ms (%d frames)", javaMs,
                best[1] != null ? best[1].ms : Double.NaN, n));
        return rt;
    }

    private static double maxDiff(Run a, Run b) {
        double m = 0;
        for (int i = 0; i < a.x.length; i++) {
            if (Double.isNaN(a.x[i]) || Double.isNaN(b.x[i])) {
                if (Double.isNaN(a.x[i]) != Double.isNaN(b.x[i])) return Double.POSITIVE_INFINITY;
                continue;
            }
            m = Math.max(m, Math.max(Math.abs(a.x[i] - b.x[i]), Math.abs(a.y[i] - b.y[i])));
        }
        return m;
    }

    static String describe(ResultsTable rt) {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < rt.size(); i++)
            s.append(rt.getStringValue("Backend", i)).append(": ").append(rt.getValue("Time (ms)", i)).append(" ms; ");
        return s.toString() + Arrays.toString(rt.getHeadings());
    }
}
