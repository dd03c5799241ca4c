package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.plugin.filter.ExtendedPlugInFilter;
import ij.process.ImageProcessor;

/**
 * The shape shared by the filters that replace an image's pixels (mean, Gaussian, ...):
 * ImageJ's {@link ExtendedPlugInFilter} protocol, so ImageJ itself checks the image type,
 * asks "Process all N slices?" for a stack (macro keyword {@code stack}), sets up Undo for a
 * single image, and records the dialog for macros.
 *
 * <p>Per slice, the slice is snapshotted (a {@code System.arraycopy}, the buffer ImageJ's
 * Undo also uses) and the native code reads the snapshot and writes the image's own pixel
 * array in place. Esc stops before the next slice; errors become {@code IJ.error} messages.
 * Calibration is untouched since the image stays the same image.
 */
abstract class InPlaceFilter extends SliceFilter {
    /** Pixel types the native operations take; with a selection, only it changes
     *  (SUPPORTS_MASKING: ImageJ restores the pixels outside a non-rectangular one). */
    static final int TYPES = DOES_8G | DOES_16 | DOES_32 | DOES_RGB | SUPPORTS_MASKING;

    InPlaceFilter(String title, String op) {
        super(title, op);
    }

    /** Runs the native operation from {@code src} into {@code dst}, both {@code w x h}. */
    abstract void filter(Object src, Object dst, int w, int h);

    /** Pixel types accepted (PlugInFilter flags). */
    @Override
    int flags() {
        return TYPES;
    }

    /**
     * With a selection, puts back the pixels outside its bounding rectangle (the whole
     * slice is filtered, so pixels inside see their real neighbours, as in ImageJ's own
     * filters); ImageJ itself restores the rest of a non-rectangular selection.
     */
    static void restoreOutside(ImageProcessor ip) {
        java.awt.Rectangle r = ip.getRoi();
        int w = ip.getWidth(), h = ip.getHeight();
        if (r.x == 0 && r.y == 0 && r.width == w && r.height == h) return;
        Object snap = ip.getSnapshotPixels(), px = ip.getPixels();
        for (int y = 0; y < h; y++) {
            if (y < r.y || y >= r.y + r.height) {
                System.arraycopy(snap, y * w, px, y * w, w);
            } else {
                System.arraycopy(snap, y * w, px, y * w, r.x);
                int right = r.x + r.width;
                System.arraycopy(snap, y * w + right, px, y * w + right, w - right);
            }
        }
    }

    @Override
    public int setup(String arg, ImagePlus imp) {
        if (imp == null) {
            IJ.noImage();
            return DONE;
        }
        return flags();
    }

    @Override
    public void run(ImageProcessor ip) {
        if (stopped()) return;
        ip.snapshot();
        try {
            filter(ip.getSnapshotPixels(), ip.getPixels(), ip.getWidth(), ip.getHeight());
            restoreOutside(ip);
        } catch (RuntimeException e) {
            ip.reset();
            fail(e);
            return;
        }
        sliceDone();
    }
}
