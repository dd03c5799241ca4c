package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.plugin.filter.ExtendedPlugInFilter;
import ij.plugin.filter.PlugInFilterRunner;
import ij.process.ByteProcessor;
import ij.process.ImageProcessor;

/**
 * Plugins &gt; Tessera &gt; Glare Removal...: detects specular highlights (bright, unsaturated
 * spots standing out of their local statistics at several scales) and fills them smoothly
 * from their surroundings. Output: two new images, the mask (8-bit, 255 on glare) and the
 * corrected image (the input's type); the source is left alone. 8, 16, 32-bit and RGB;
 * stacks; the report (spots, pixels, thresholds) goes to the status bar and the log.
 * Macro: {@code run("Glare Removal...", "mode=adaptive radii=5,15,45 k=3 brightness=0.8 contrast=0.08 saturation=0.35 minimum=2 maximum=2000 grow=1 fill=100 backend=auto")}.
 */
public class GlarePlugin implements ExtendedPlugInFilter {
    static final String TITLE = "Glare Removal";
    static final String[] MODES = {"adaptive", "manual"};
    /** The last values of the session, from the native defaults at first. */
    private static Options last;
    private static final int FLAGS = DOES_8G | DOES_16 | DOES_32 | DOES_RGB | NO_CHANGES | NO_UNDO | FINAL_PROCESSING;

    private ImagePlus imp;
    private ImageStack masks, corrected;
    private int nPasses = 1, pass;
    private boolean stopped;

    @Override
    public int setup(String arg, ImagePlus imp) {
        if ("final".equals(arg)) {
            show();
            return DONE;
        }
        if (imp == null) {
            IJ.noImage();
            return DONE;
        }
        this.imp = imp;
        return FLAGS;
    }

    @Override
    public int showDialog(ImagePlus imp, String command, PlugInFilterRunner pfr) {
        Params gd = new Params(TITLE);
        try {
            if (last == null) last = Options.defaults("glare");
        } catch (RuntimeException e) {
            Tessera.error(TITLE, e);
            return DONE;
        }
        gd.addChoice("Mode (thresholds)", MODES, last.get("mode"));
        gd.addString("Radii (box, comma-separated)", last.get("radii"));
        gd.addNumber("k (local sigmas above the mean)", last.number("k-sigma"), 2, "");
        gd.addNumber("Brightness (manual, fraction of full scale)", last.number("brightness"), 3, "");
        gd.addNumber("Contrast (manual, fraction of full scale)", last.number("min-contrast"), 3, "");
        gd.addNumber("Saturation (largest, RGB)", last.number("max-saturation"), 3, "");
        gd.addNumber("Minimum spot area", last.integer("min-area"), 0, "pixels");
        gd.addNumber("Maximum spot area", last.integer("max-area"), 0, "pixels");
        gd.addNumber("Grow (rim)", last.integer("grow"), 0, "pixels");
        gd.addNumber("Fill sweeps", last.integer("fill-iterations"), 0, "");
        Tessera.addBackendChoice(gd);
        if (!gd.show()) return DONE;
        try {
            String m = gd.nextChoice();
            String r = gd.nextString().trim();
            double k = gd.nextNumber(), b = gd.nextNumber(), c = gd.nextNumber(), s = gd.nextNumber();
            double amin = gd.nextNumber(), amax = gd.nextNumber(), g = gd.nextNumber(), f = gd.nextNumber();
            Tessera.readBackendChoice(gd);
            if (gd.invalidNumber() || amin != Math.rint(amin) || amax != Math.rint(amax) || g != Math.rint(g) || f != Math.rint(f))
                throw new IllegalArgumentException("the areas, grow and the fill sweeps must be whole numbers");
            // The radii list and the ranges are checked natively, once, by the first slice's call.
            last.set("mode", m).set("radii", r).set("k-sigma", k).set("brightness", b).set("min-contrast", c)
                    .set("max-saturation", s).set("min-area", (int) amin).set("max-area", (int) amax).set("grow", (int) g)
                    .set("fill-iterations", (int) f);
        } catch (IllegalArgumentException e) {
            Tessera.error(TITLE, e);
            return DONE;
        }
        return Params.stackFlags(imp, FLAGS);
    }

    @Override
    public void setNPasses(int nPasses) {
        this.nPasses = Math.max(1, nPasses);
        masks = new ImageStack(imp.getWidth(), imp.getHeight());
        corrected = new ImageStack(imp.getWidth(), imp.getHeight());
    }

    @Override
    public void run(ImageProcessor ip) {
        if (stopped) return;
        if (IJ.escapePressed()) {
            stopped = true;
            IJ.showStatus(TITLE + ": stopped by Esc");
            return;
        }
        int w = ip.getWidth(), h = ip.getHeight();
        byte[] mask = new byte[w * h];
        ImageProcessor out = ip.createProcessor(w, h);
        String report;
        try {
            report = Native.glare(ip.getPixels(), mask, out.getPixels(), w, h, Tessera.withBackend(last)).summary;
        } catch (RuntimeException e) {
            stopped = true;
            Tessera.error(TITLE, e);
            return;
        }
        String label = "slice " + ip.getSliceNumber() + ": " + report;
        masks.addSlice(label, new ByteProcessor(w, h, mask));
        corrected.addSlice(label, out);
        IJ.log(TITLE + " " + imp.getTitle() + ", " + label);
        IJ.showStatus(TITLE + ": " + report);
        IJ.showProgress(++pass, nPasses);
    }

    private void show() {
        if (stopped || masks == null || masks.getSize() == 0) return;
        ImagePlus m = new ImagePlus("Glare mask of " + imp.getTitle(), masks);
        ImagePlus c = new ImagePlus("Glare corrected " + imp.getTitle(), corrected);
        for (ImagePlus r : new ImagePlus[] {m, c}) {
            r.setCalibration(imp.getCalibration().copy());
        }
        m.getCalibration().disableDensityCalibration();
        c.setDisplayRange(imp.getDisplayRangeMin(), imp.getDisplayRangeMax());
        m.show();
        c.show();
    }
}
