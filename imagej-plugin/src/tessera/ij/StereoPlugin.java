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
    private static int maxDisp = 64, cost = 0, paths = 2, p1 = -1, p2 = -1, uniqueness = 0;
    private static boolean subpixel = true, lrCheck = true, median = true, fill = true;

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
        gd.addChoice("Left image", titles, titles[0]);
        gd.addChoice("Right image", titles, titles[1]);
        gd.addNumber("Disparities (max disparity + 1)", maxDisp, 0, "");
        gd.addChoice("Cost", Native.COSTS, Native.COSTS[cost]);
        gd.addChoice("Paths", PATHS, PATHS[paths]);
        gd.addNumber("P1 (-1: default)", p1, 0, "");
        gd.addNumber("P2 (-1: default)", p2, 0, "");
        gd.addNumber("Uniqueness (%)", uniqueness, 0, "");
        gd.addCheckbox("Subpixel", subpixel);
        gd.addCheckbox("Left-right check", lrCheck);
        gd.addCheckbox("Median (3x3)", median);
        gd.addCheckbox("Fill holes", fill);
        Tessera.addBackendChoice(gd);
        if (!gd.show()) return;
        ImagePlus left, right;
        try {
            left = WindowManager.getImage(ids[gd.nextChoiceIndex()]);
            right = WindowManager.getImage(ids[gd.nextChoiceIndex()]);
            double d = gd.nextNumber();
            cost = gd.nextChoiceIndex();
            paths = gd.nextChoiceIndex();
            double a = gd.nextNumber(), b = gd.nextNumber(), u = gd.nextNumber();
            subpixel = gd.nextBoolean();
            lrCheck = gd.nextBoolean();
            median = gd.nextBoolean();
            fill = gd.nextBoolean();
            Tessera.readBackendChoice(gd);
            if (gd.invalidNumber() || d != Math.rint(d) || a != Math.rint(a) || b != Math.rint(b) || u != Math.rint(u))
                throw new IllegalArgumentException("disparities, P1, P2 and uniqueness must be whole numbers");
            maxDisp = (int) d;
            p1 = (int) a;
            p2 = (int) b;
            uniqueness = (int) u;
        } catch (IllegalArgumentException e) {
            Tessera.error(TITLE, e);
            return;
        }
        ImagePlus out = match(left, right);
        if (out != null) out.show();
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
            IJ.showStatus("Stereo SGM: matching...");
            summary = Native.stereoSgm(left.getProcessor().getPixels(), right.getProcessor().getPixels(), disp, w, h, maxDisp,
                    cost, Integer.parseInt(PATHS[paths]), p1, p2, uniqueness, subpixel, lrCheck, median, fill, Tessera.backend);
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
        out.setDisplayRange(0, maxDisp);
        Calibration cal = left.getCalibration().copy();
        cal.disableDensityCalibration();
        cal.setValueUnit("disparity (pixels)");
        out.setCalibration(cal);
        out.setProperty("Info", "Tessera stereo SGM (" + Native.COSTS[cost] + ", " + PATHS[paths] + " paths, "
                + maxDisp + " disparities, backend " + Tessera.backend + "): " + summary);
        IJ.showStatus(String.format("Stereo SGM: %.2f s; %s", secs, summary));
        return out;
    }

    private static void applyLut(ImagePlus imp) {
        java.awt.image.IndexColorModel cm = LutLoader.getLut("fire");
        if (cm != null) imp.getProcessor().setColorModel(cm);
    }
}
