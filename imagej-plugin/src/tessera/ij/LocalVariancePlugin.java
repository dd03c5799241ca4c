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
    static final String[] METHODS = {"usual", "koenig", "welford", "pairwise", "threewise", "recursive"};
    static final String[] KERNELS = {"tent", "box"};
    /** Normalize has no meaning for a variance (the weights would depend on the position). */
    private static final String[] BORDERS = {"reflect-101", "replicate", "constant"};
    public LocalVariancePlugin() {
        super("Local Variance", "variance");
    }

    @Override
    String outputTitle(ImagePlus src) {
        return "Local variance (" + last().get("kernel") + " r=" + last().get("radius") + ") of " + src.getTitle();
    }

    @Override
    boolean acceptsRgb() {
        return true;
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addChoice("Method", METHODS, last().get("method"));
        gd.addChoice("Kernel", KERNELS, last().get("kernel"));
        gd.addNumber("Radius", last().integer("radius"), 0, "pixels (tent: 1, 3, 7, ..., 255)");
        Tessera.addBorderFields(gd, last(), BORDERS);
    }

    @Override
    boolean readFields(Params gd) {
        last().set("method", gd.nextChoice()).set("kernel", gd.nextChoice());
        double r = gd.nextNumber();
        Tessera.readBorderFields(gd, last());
        if (gd.invalidNumber() || r != Math.rint(r) || r < 0) {
            Tessera.error(title(), "the radius must be a whole number >= 0");
            return false;
        }
        last().set("radius", (int) r);
        return true;
    }

    @Override
    void filter(Object src, float[] dst, int w, int h) {
        Native.localVariance(src, dst, w, h, Tessera.withBackend(last()));
    }
}
