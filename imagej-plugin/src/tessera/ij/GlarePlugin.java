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
    private static int mode = 0, minArea = 2, maxArea = 2000, grow = 1, fillIterations = 100;
    private static String radii = "5,15,45";
    private static double kSigma = 3, brightness = 0.8, minContrast = 0.08, maxSaturation = 0.35;
    private static final int FLAGS = DOES_8G | DOES_16 | DOES_32 | DOES_RGB | NO_CHANGES | NO_UNDO | FINAL_PROCESSING;

    private ImagePlus imp;
    private int[] parsed;
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
        gd.addChoice("Mode (thresholds)", MODES, MODES[mode]);
        gd.addString("Radii (box, comma-separated)", radii);
        gd.addNumber("k (local sigmas above the mean)", kSigma, 2, "");
        gd.addNumber("Brightness (manual, fraction of full scale)", brightness, 3, "");
        gd.addNumber("Contrast (manual, fraction of full scale)", minContrast, 3, "");
        gd.addNumber("Saturation (largest, RGB)", maxSaturation, 3, "");
        gd.addNumber("Minimum spot area", minArea, 0, "pixels");
        gd.addNumber("Maximum spot area", maxArea, 0, "pixels");
        gd.addNumber("Grow (rim)", grow, 0, "pixels");
        gd.addNumber("Fill sweeps", fillIterations, 0, "");
        Tessera.addBackendChoice(gd);
        if (!gd.show()) return DONE;
        try {
            int m = gd.nextChoiceIndex();
            String r = gd.nextString();
            double k = gd.nextNumber(), b = gd.nextNumber(), c = gd.nextNumber(), s = gd.nextNumber();
            double amin = gd.nextNumber(), amax = gd.nextNumber(), g = gd.nextNumber(), f = gd.nextNumber();
            Tessera.readBackendChoice(gd);
            if (gd.invalidNumber() || amin != Math.rint(amin) || amax != Math.rint(amax) || g != Math.rint(g) || f != Math.rint(f))
                throw new IllegalArgumentException("the areas, grow and the fill sweeps must be whole numbers");
            String[] parts = r.trim().split("\\s*,\\s*");
            int[] p = new int[parts.length];
            for (int i = 0; i < parts.length; i++) {
                try {
                    p[i] = Integer.parseInt(parts[i]);
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("radii must be whole numbers separated by commas, e.g. 5,15,45; got \"" + r + "\"");
                }
            }
            mode = m;
            radii = r;
            parsed = p;
            kSigma = k;
            brightness = b;
            minContrast = c;
            maxSaturation = s;
            minArea = (int) amin;
            maxArea = (int) amax;
            grow = (int) g;
            fillIterations = (int) f;
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
            report = Native.glare(ip.getPixels(), mask, out.getPixels(), w, h, mode == 0, parsed, (float) kSigma,
                    (float) brightness, (float) minContrast, (float) maxSaturation, minArea, maxArea, grow, fillIterations,
                    Tessera.backend);
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
