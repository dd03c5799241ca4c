package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.measure.ResultsTable;
import ij.plugin.PlugIn;

/**
 * Plugins &gt; Tessera &gt; Panorama (NCC log search)...: stitches the frames of the current
 * stack (a video sweep) into one panorama. In each reference frame NPTS x NPTS templates of
 * side rsz are found in the next frame by a logarithmic search on the normalized
 * cross-correlation; vectors below cthresh are dropped; the agreeing rest give the shift.
 * Motion "similarity" (the default) also fits each pair's rotation where it is significant
 * against the vectors' scatter (a pair that shows no turn keeps the shift exactly), and the
 * panorama resamples turned frames (bilinear); "translation" fits the shift alone.
 * A frame that cannot be registered is skipped (with its reason) and registration goes on.
 * A progress bar follows the frames and Esc cancels the run (no image is made).
 *
 * <p>Output: the panorama (same pixel type as the stack, the stack's spatial calibration,
 * its origin set so that frame 1 keeps its coordinates) and a Results table "Panorama
 * frames" (also attached to the panorama as the property {@code TesseraFrames}) with each
 * frame's x, y, angle (degrees; frame i's pixel (u, v) shows what frame 1 shows at
 * (x, y) + R(angle) (u, v), y down), NCC, status, island, vectors, confidence and quality.
 * A run that loses its way and finds nothing to return to registers what follows on an
 * island of its own and joins it to the others where their frames meet; the panorama holds
 * the largest joined set, the frames of any other say "island" with their pose relative to
 * their island's first frame, and a table "Panorama islands" (also the property
 * {@code TesseraIslands}) lists the islands.
 * Macro: {@code run("Panorama (NCC log search)...", "rsz=25 cthresh=0.85 npts=6 radius=32 search=log motion=similarity blend=overwrite keyframe=0.25 minimum=4 subpixel backend=auto")}.
 */
public class PanoramaPlugin implements PlugIn {
    static final String TITLE = "Panorama (NCC log search)";
    static final String TABLE = "Panorama frames";
    static final String ISLANDS_TABLE = "Panorama islands";
    static final String[] SEARCHES = {"log", "log-plain", "exhaustive"};
    static final String[] MOTIONS = {"similarity", "translation"};
    static final String[] BLENDS = {"overwrite", "average", "feather"};
    /** The last values of the session, from the native defaults at first. */
    private static Options last;

    @Override
    public void run(String arg) {
        ImagePlus imp = IJ.getImage();
        if (imp == null) return;
        if (imp.getStackSize() < 2) {
            Tessera.error(TITLE, "Panorama needs a stack of at least 2 frames; \"" + imp.getTitle() + "\" has "
                    + imp.getStackSize() + " slice. Open a sequence (File > Import > Image Sequence...) first.");
            return;
        }
        if (imp.getType() == ImagePlus.COLOR_256) {
            Tessera.error(TITLE, "8-bit colour (LUT) stacks are not supported; convert to RGB or 8-bit gray first.");
            return;
        }
        Params gd = new Params(TITLE);
        try {
            options();
        } catch (RuntimeException e) {
            Tessera.error(TITLE, e);
            return;
        }
        gd.addNumber("rsz (template side)", last.integer("rsz"), 0, "pixels");
        gd.addNumber("cthresh (NCC threshold)", last.number("cthresh"), 2, "");
        gd.addNumber("NPTS (templates per side)", last.integer("npts"), 0, "");
        gd.addNumber("Radius (search)", last.integer("search-radius"), 0, "pixels");
        gd.addChoice("Search", SEARCHES, last.get("method"));
        gd.addChoice("Motion", MOTIONS, last.get("motion"));
        gd.addChoice("Blend", BLENDS, last.get("blend"));
        gd.addNumber("Keyframe shift (fraction of the frame)", last.number("keyframe-shift"), 2, "");
        gd.addNumber("Minimum template variance", last.number("min-variance"), 1, "");
        gd.addCheckbox("Subpixel", last.flag("subpixel"));
        Tessera.addBackendChoice(gd);
        if (!gd.show()) return;
        try {
            double r = gd.nextNumber(), c = gd.nextNumber(), n = gd.nextNumber(), rad = gd.nextNumber();
            String se = gd.nextChoice(), mo = gd.nextChoice(), b = gd.nextChoice();
            double k = gd.nextNumber(), mv = gd.nextNumber();
            boolean sp = gd.nextBoolean();
            Tessera.readBackendChoice(gd);
            if (gd.invalidNumber() || r != Math.rint(r) || n != Math.rint(n) || rad != Math.rint(rad))
                throw new IllegalArgumentException("rsz, NPTS and the search radius must be whole numbers");
            last.set("rsz", (int) r).set("cthresh", c).set("npts", (int) n).set("search-radius", (int) rad)
                    .set("method", se).set("motion", mo).set("blend", b).set("keyframe-shift", k).set("min-variance", mv).set("subpixel", sp);
        } catch (IllegalArgumentException e) {
            Tessera.error(TITLE, e);
            return;
        }
        ImagePlus pano = stitch(imp);
        if (pano != null) pano.show();
    }

    /** The session's options, the native defaults at first. */
    private static Options options() {
        if (last == null) last = Options.defaults("stitch");
        return last;
    }

    /**
     * Stitches {@code imp}'s stack with the current parameters; null after an error or when
     * cancelled. A progress bar follows the frames; Esc stops the run after the frame being
     * registered (status "Panorama cancelled ...", no image, no error message, the Esc flag
     * reset).
     */
    static ImagePlus stitch(ImagePlus imp) {
        ImageStack st = imp.getStack();
        int n = st.getSize();
        Object[] frames = new Object[n];
        for (int i = 0; i < n; i++) frames[i] = st.getPixels(i + 1);
        long t0 = System.nanoTime();
        IJ.showStatus("Panorama: registering " + n + " frames (Esc to cancel)...");
        StitchResult s = Tessera.withProgress(TITLE,
                progress -> Native.stitch(frames, st.getWidth(), st.getHeight(), Tessera.withBackend(options()), progress),
                (done, total) -> "Panorama cancelled after " + done + " of " + total + " frames");
        if (s == null) return null;
        double secs = (System.nanoTime() - t0) / 1e9;
        ImagePlus pano = Tessera.canvasImage("Panorama of " + imp.getTitle(), imp, s.pixels, s.width, s.height, s.originX, s.originY);
        ResultsTable rt = table(s, imp);
        pano.setProperty("TesseraFrames", rt);
        rt.show(TABLE);
        ResultsTable islands = islandsTable(s);
        pano.setProperty("TesseraIslands", islands);
        if (islands.size() > 1) islands.show(ISLANDS_TABLE);
        int ok = 0;
        for (StitchResult.Frame f : s.frames) if (f.ok) ok++;
        IJ.showStatus(String.format("Panorama: %d of %d frames registered in %.2f s (%s)", ok, n, secs, Tessera.backend));
        return pano;
    }

    /**
     * One row per island (the frames registered after the run lost its way and found
     * nothing to return to, chained among themselves): its first frame, its frames, whether
     * the panorama holds it, and the pairs it joined another by (its frame and the other
     * island's keyframe, 1-based).
     */
    static ResultsTable islandsTable(StitchResult s) {
        ResultsTable rt = new ResultsTable();
        java.util.TreeSet<Integer> firsts = new java.util.TreeSet<>();
        for (StitchResult.Frame f : s.frames) if (f.island > 0) firsts.add(f.island);
        for (int first : firsts) {
            int frames = 0;
            boolean inPanorama = false;
            StringBuilder joins = new StringBuilder();
            for (int i = 0; i < s.frames.length; i++) {
                StitchResult.Frame f = s.frames[i];
                if (f.island != first) continue;
                frames++;
                inPanorama |= f.ok;
                if (f.joined > 0) joins.append(joins.length() > 0 ? ", " : "").append(i + 1).append(" on ").append(f.joined);
            }
            rt.incrementCounter();
            rt.addValue("First frame", first);
            rt.addValue("Frames", frames);
            rt.addValue("In panorama", inPanorama ? "yes" : "no");
            rt.addValue("Joined by", joins.toString());
        }
        return rt;
    }

    static ResultsTable table(StitchResult s, ImagePlus imp) {
        ResultsTable rt = new ResultsTable();
        for (int i = 0; i < s.frames.length; i++) {
            StitchResult.Frame f = s.frames[i];
            rt.incrementCounter();
            rt.addValue("Frame", i + 1);
            String label = imp.getStack().getShortSliceLabel(i + 1);
            if (label != null) rt.addLabel(label);
            rt.addValue("x", f.x);
            rt.addValue("y", f.y);
            rt.addValue("angle", f.angle);
            rt.addValue("NCC", f.ncc);
            rt.addValue("Status", f.ok ? "ok" : f.onIsland ? "island" : "skipped");
            rt.addValue("Island", f.island);
            rt.addValue("Joined", f.joined);
            rt.addValue("Vectors", f.vectors);
            rt.addValue("Confidence", f.confidence);
            rt.addValue("Quality", f.quality);
            rt.addValue("Quality (5x5 grid)", f.qualityGrid);
            rt.addValue("Reason", f.reason == null ? "" : f.reason);
        }
        return rt;
    }
}
