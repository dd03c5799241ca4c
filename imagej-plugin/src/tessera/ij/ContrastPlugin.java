package tessera.ij;

import ij.ImagePlus;

/**
 * Plugins &gt; Tessera &gt; Contrast Enhancement...: multi-scale local contrast enhancement
 * from the exact local mean and variance (tent kernels of the given radii): each pixel's
 * deviation from its local mean is scaled towards a target spread, with the gain bounded.
 * In place, with Undo; 8, 16, 32-bit and RGB (on the luma, keeping hue); stacks.
 * Macro: {@code run("Contrast Enhancement...", "radii=7,31,127 alpha=1 gain=3 minimum=1 noise=0.1 backend=auto")}.
 */
public class ContrastPlugin extends InPlaceFilter {
    public ContrastPlugin() {
        super("Contrast Enhancement", "contrast");
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addString("Radii (tent, comma-separated)", last().get("radii"));
        gd.addNumber("Alpha (target spread / global sigma)", last().number("alpha"), 2, "");
        gd.addNumber("Gain (largest)", last().number("gain-max"), 2, "");
        gd.addNumber("Minimum gain", last().number("gain-min"), 2, "");
        gd.addNumber("Noise floor (fraction of global sigma)", last().number("noise"), 3, "");
    }

    @Override
    boolean readFields(Params gd) {
        String r = gd.nextString().trim();
        double a = gd.nextNumber(), g = gd.nextNumber(), m = gd.nextNumber(), n = gd.nextNumber();
        if (gd.invalidNumber()) {
            Tessera.error(title(), "alpha, the gains and the noise floor must be numbers");
            return false;
        }
        // The radii list is parsed and checked natively, with the alpha, gains and noise.
        last().set("radii", r).set("alpha", a).set("gain-max", g).set("gain-min", m).set("noise", n);
        return true;
    }

    @Override
    void filter(Object src, Object dst, int w, int h) {
        Native.contrastEnhance(src, dst, w, h, Tessera.withBackend(last()));
    }
}
