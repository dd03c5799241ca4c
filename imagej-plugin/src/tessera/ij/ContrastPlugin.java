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
    private static String radii = "7,31,127";
    private static double alpha = 1, gainMax = 3, gainMin = 1, noise = 0.1;
    private int[] parsed;

    @Override
    String title() {
        return "Contrast Enhancement";
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addString("Radii (tent, comma-separated)", radii);
        gd.addNumber("Alpha (target spread / global sigma)", alpha, 2, "");
        gd.addNumber("Gain (largest)", gainMax, 2, "");
        gd.addNumber("Minimum gain", gainMin, 2, "");
        gd.addNumber("Noise floor (fraction of global sigma)", noise, 3, "");
    }

    @Override
    boolean readFields(Params gd) {
        String r = gd.nextString();
        double a = gd.nextNumber(), g = gd.nextNumber(), m = gd.nextNumber(), n = gd.nextNumber();
        if (gd.invalidNumber()) {
            Tessera.error(title(), "alpha, the gains and the noise floor must be numbers");
            return false;
        }
        String[] parts = r.trim().split("\\s*,\\s*");
        int[] p = new int[parts.length];
        try {
            for (int i = 0; i < parts.length; i++) p[i] = Integer.parseInt(parts[i]);
        } catch (NumberFormatException e) {
            Tessera.error(title(), "radii must be whole numbers separated by commas, e.g. 7,31,127; got \"" + r + "\"");
            return false;
        }
        radii = r;
        parsed = p;
        alpha = a;
        gainMax = g;
        gainMin = m;
        noise = n;
        return true;
    }

    @Override
    void filter(Object src, Object dst, int w, int h) {
        Native.contrastEnhance(src, dst, w, h, parsed, (float) alpha, (float) gainMax, (float) gainMin, (float) noise, Tessera.backend);
    }
}
