package tessera.ij;

import ij.ImagePlus;

/**
 * Plugins &gt; Tessera &gt; Local Variance...: for every pixel the weighted variance of its
 * neighbourhood, as a new 32-bit image. Kernels: the centre-weighted tent of the variance
 * paper (radius 2^k - 1: 1, 3, 7, ..., 255) or a uniform box (any radius up to 2047). Six
 * methods compute the same quantity (the paper's usual, koenig, welford, pairwise,
 * threewise, and the exact O(1) recursive one). 8, 16, 32-bit gray and RGB (its Rec. 601
 * luma); stacks.
 * Macro: {@code run("Local Variance...", "method=recursive kernel=box radius=63 border=reflect-101 value=0 backend=auto")}.
 */
public class LocalVariancePlugin extends NewImageFilter {
    private static int method = 5, kernel = 0, radius = 7, border = Native.BORDER_REFLECT101;
    private static double value = 0;
    private static final String[] BORDERS = {"reflect-101", "replicate", "constant"};

    @Override
    String title() {
        return "Local Variance";
    }

    @Override
    String outputTitle(ImagePlus src) {
        return "Local variance (" + Native.KERNELS[kernel] + " r=" + radius + ") of " + src.getTitle();
    }

    @Override
    boolean acceptsRgb() {
        return true;
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addChoice("Method", Native.VARIANCE_METHODS, Native.VARIANCE_METHODS[method]);
        gd.addChoice("Kernel", Native.KERNELS, Native.KERNELS[kernel]);
        gd.addNumber("Radius", radius, 0, "pixels (tent: 1, 3, 7, ..., 255)");
        gd.addChoice("Border", BORDERS, BORDERS[border]);
        gd.addNumber("Value (constant border)", value, 2, "");
    }

    @Override
    boolean readFields(Params gd) {
        method = gd.nextChoiceIndex();
        kernel = gd.nextChoiceIndex();
        double r = gd.nextNumber();
        border = gd.nextChoiceIndex();
        value = gd.nextNumber();
        if (gd.invalidNumber() || r != Math.rint(r) || r < 0) {
            Tessera.error(title(), "the radius must be a whole number >= 0");
            return false;
        }
        radius = (int) r;
        return true;
    }

    @Override
    void filter(Object src, float[] dst, int w, int h) {
        Native.localVariance(src, dst, w, h, method, kernel, radius, border, (float) value, Tessera.backend);
    }
}
