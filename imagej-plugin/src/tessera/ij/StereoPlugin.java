package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.WindowManager;
import ij.measure.Calibration;
import ij.plugin.LutLoader;
import ij.plugin.PlugIn;
import ij.process.FloatProcessor;

/**
 * Plugins &gt; Tessera &gt; Stereo SGM...: semi-global matching (Hirschmueller 2008) of two
 * open images, a rectified left / right pair of the same size, both 8-bit gray or both
 * RGB. Output: the left image's disparity map as a 32-bit image (pixels without a
 * disparity are NaN, which ImageJ leaves out of measurements) with the Fire LUT, display
 * range 0 .. max disparity, the left image's spatial calibration.
 * Macro: {@code run("Stereo SGM...", "left=im2.png right=im6.png disparities=64 cost=census paths=8 p1=-1 p2=-1 uniqueness=0 subpixel left-right median fill backend=auto")}.
 */
public class StereoPlugin implements PlugIn {
    static final String TITLE = "Stereo SGM";
    static final String[] PATHS = {"4", "5", "8", "16"};
    /** The dialog's cost names, in the native options' order (census, ad, mi, mi-hierarchical). */
    static final String[] COSTS = {"census", "AD", "MI", "MI-hierarchical"};
    /** The last values of the session, from the native defaults at first. */
    private static Options last;

    @Override
    public void run(String arg) {
        int[] ids = WindowManager.getIDList();
        if (ids == null || ids.length < 2) {
            Tessera.error(TITLE, "Stereo SGM needs two open images: the left and the right view of a rectified pair.");
            return;
        }
        String[] titles = new String[ids.length];
        for (int i = 0; i < ids.length; i++) titles[i] = WindowManager.getImage(ids[i]).getTitle();
        Params gd = new Params(TITLE);
        try {
            options();
        } catch (RuntimeException e) {
            Tessera.error(TITLE, e);
            return;
        }
        gd.addChoice("Left image", titles, titles[0]);
        gd.addChoice("Right image", titles, titles[1]);
        gd.addNumber("Disparities (max disparity + 1)", last.integer("max-disp"), 0, "");
        gd.addChoice("Cost", COSTS, COSTS[Tessera.choiceOf(COSTS, last.get("cost"))]);
        gd.addChoice("Paths", PATHS, last.get("paths"));
        gd.addNumber("P1 (-1: default)", penaltyField(last.get("p1")), 0, "");
        gd.addNumber("P2 (-1: default)", penaltyField(last.get("p2")), 0, "");
        gd.addNumber("Uniqueness (%)", last.integer("uniqueness"), 0, "");
        gd.addCheckbox("Subpixel", last.flag("subpixel"));
        gd.addCheckbox("Left-right check", last.flag("lr-check"));
        gd.addCheckbox("Median (3x3)", last.flag("median"));
        gd.addCheckbox("Fill holes", last.flag("fill"));
        Tessera.addBackendChoice(gd);
        if (!gd.show()) return;
        ImagePlus left, right;
        try {
            left = WindowManager.getImage(ids[gd.nextChoiceIndex()]);
            right = WindowManager.getImage(ids[gd.nextChoiceIndex()]);
            double d = gd.nextNumber();
            String cost = gd.nextChoice().toLowerCase(java.util.Locale.ROOT), paths = gd.nextChoice();
            double a = gd.nextNumber(), b = gd.nextNumber(), u = gd.nextNumber();
            boolean sp = gd.nextBoolean(), lr = gd.nextBoolean(), med = gd.nextBoolean(), fill = gd.nextBoolean();
            Tessera.readBackendChoice(gd);
            if (gd.invalidNumber() || d != Math.rint(d) || a != Math.rint(a) || b != Math.rint(b) || u != Math.rint(u))
                throw new IllegalArgumentException("disparities, P1, P2 and uniqueness must be whole numbers");
            last.set("max-disp", (int) d).set("cost", cost).set("paths", paths).set("p1", penaltyOption(a)).set("p2", penaltyOption(b))
                    .set("uniqueness", (int) u).set("subpixel", sp).set("lr-check", lr).set("median", med).set("fill", fill);
        } catch (IllegalArgumentException e) {
            Tessera.error(TITLE, e);
            return;
        }
        ImagePlus out = match(left, right);
        if (out != null) out.show();
    }

    /** The session's options, the native defaults at first. */
    private static Options options() {
        if (last == null) last = Options.defaults("stereo");
        return last;
    }

    /** The dialog's penalty for an option's ("auto" is -1). */
    private static int penaltyField(String option) {
        return option.equals("auto") ? -1 : Integer.parseInt(option);
    }

    /** The option's penalty for the dialog's (a negative one is "auto"). */
    private static String penaltyOption(double dialog) {
        return dialog < 0 ? "auto" : String.valueOf((int) dialog);
    }

    /** Matches the current slices of {@code left} and {@code right}; null after an error. */
    static ImagePlus match(ImagePlus left, ImagePlus right) {
        if (left.getWidth() != right.getWidth() || left.getHeight() != right.getHeight()) {
            Tessera.error(TITLE, "the left and right images differ in size: " + left.getWidth() + "x" + left.getHeight()
                    + " and " + right.getWidth() + "x" + right.getHeight());
            return null;
        }
        int w = left.getWidth(), h = left.getHeight();
        float[] disp = new float[w * h];
        String summary;
        long t0 = System.nanoTime();
        try {
            String options = Tessera.withBackend(options());
            IJ.showStatus("Stereo SGM: matching...");
            summary = Native.stereoSgm(left.getProcessor().getPixels(), right.getProcessor().getPixels(), disp, w, h, options).summary;
        } catch (RuntimeException e) {
            Tessera.error(TITLE, e);
            return null;
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        // ImageJ's "no value" in 32-bit images is NaN (left out of statistics), not infinity.
        for (int i = 0; i < disp.length; i++) if (disp[i] == Float.POSITIVE_INFINITY) disp[i] = Float.NaN;
        FloatProcessor fp = new FloatProcessor(w, h, disp, null);
        ImagePlus out = new ImagePlus("Disparity of " + left.getTitle(), fp);
        applyLut(out);
        out.setDisplayRange(0, last.integer("max-disp"));
        Calibration cal = left.getCalibration().copy();
        cal.disableDensityCalibration();
        cal.setValueUnit("disparity (pixels)");
        out.setCalibration(cal);
        out.setProperty("Info", "Tessera stereo SGM (" + COSTS[Tessera.choiceOf(COSTS, last.get("cost"))] + ", " + last.get("paths")
                + " paths, " + last.get("max-disp") + " disparities, backend " + Tessera.backend + "): " + summary);
        IJ.showStatus(String.format("Stereo SGM: %.2f s; %s", secs, summary));
        return out;
    }

    private static void applyLut(ImagePlus imp) {
        java.awt.image.IndexColorModel cm = LutLoader.getLut("fire");
        if (cm != null) imp.getProcessor().setColorModel(cm);
    }
}
