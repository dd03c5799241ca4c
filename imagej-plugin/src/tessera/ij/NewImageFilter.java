package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.ImageStack;
import ij.measure.Calibration;
import ij.process.FloatProcessor;
import ij.process.ImageProcessor;

/**
 * The shape shared by the gray operations whose result is a new 32-bit image (local
 * variance, ...): the source is left alone (NO_CHANGES), each processed slice becomes a
 * slice of the new image, which is shown at the end with the source's spatial calibration.
 * Stacks ("Process all N images?" / macro keyword {@code stack}), progress bar, Esc between
 * slices and {@code IJ.error} messages as in {@link InPlaceFilter}. RGB images are refused
 * with a message saying what to do.
 */
abstract class NewImageFilter extends SliceFilter {
    static final int TYPES = DOES_8G | DOES_16 | DOES_32;
    private static final int FLAGS = TYPES | NO_CHANGES | NO_UNDO | FINAL_PROCESSING;

    private ImagePlus imp;
    private ImageStack out;

    NewImageFilter(String title, String op) {
        super(title, op);
    }

    /** Title of the new image made from {@code src}. */
    abstract String outputTitle(ImagePlus src);

    /** Runs the native operation from ImageJ's pixel array {@code src} into {@code dst}. */
    abstract void filter(Object src, float[] dst, int w, int h);

    /** Whether RGB input is taken (the operation then works on its luminance). */
    boolean acceptsRgb() {
        return false;
    }

    @Override
    public int setup(String arg, ImagePlus imp) {
        if ("final".equals(arg)) {
            showResult();
            return DONE;
        }
        if (imp == null) {
            IJ.noImage();
            return DONE;
        }
        if ((imp.getType() == ImagePlus.COLOR_RGB && !acceptsRgb()) || imp.getType() == ImagePlus.COLOR_256) {
            Tessera.error(title(), title() + " works on 8-bit, 16-bit and 32-bit gray images; \""
                    + imp.getTitle() + "\" is colour. Convert it first (Image > Type > 8-bit or 32-bit).");
            return DONE;
        }
        this.imp = imp;
        return flags();
    }

    @Override
    int flags() {
        return acceptsRgb() ? FLAGS | DOES_RGB : FLAGS;
    }

    @Override
    public void setNPasses(int nPasses) {
        super.setNPasses(nPasses);
        this.out = new ImageStack(imp.getWidth(), imp.getHeight());
    }

    @Override
    public void run(ImageProcessor ip) {
        if (stopped()) return;
        int w = ip.getWidth(), h = ip.getHeight();
        float[] dst = new float[w * h];
        try {
            filter(ip.getPixels(), dst, w, h);
        } catch (RuntimeException e) {
            fail(e);
            return;
        }
        String label = imp.getStackSize() > 1 ? imp.getStack().getShortSliceLabel(ip.getSliceNumber()) : null;
        out.addSlice(label, new FloatProcessor(w, h, dst, null));
        sliceDone();
    }

    private void showResult() {
        if (wasStopped() || out == null || out.getSize() == 0) return;
        ImagePlus res = new ImagePlus(outputTitle(imp), out);
        Calibration cal = imp.getCalibration().copy();
        cal.disableDensityCalibration(); // the values are new quantities, not the source's
        res.setCalibration(cal);
        res.resetDisplayRange();
        res.show();
    }
}
