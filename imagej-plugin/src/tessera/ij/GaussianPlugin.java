package tessera.ij;

import ij.ImagePlus;

/**
 * Plugins &gt; Tessera &gt; Gaussian Blur (Tessera)...: (not "Gaussian Blur...", which would shadow ImageJ's own command of that name) Gaussian of standard deviation sigma (pixels),
 * FIR or recursive IIR. 8-bit, 16-bit, 32-bit and RGB (per channel), whole stacks.
 * Macro: {@code run("Gaussian Blur (Tessera)...", "sigma=2 method=auto border=reflect-101 value=0 backend=auto")}.
 */
public class GaussianPlugin extends InPlaceFilter {
    static final String[] METHODS = {"auto", "FIR", "IIR"};
    private static double sigma = 2;
    private static int method = Native.GAUSS_AUTO, border = Native.BORDER_REFLECT101;
    private static double value = 0;

    @Override
    String title() {
        return "Gaussian Blur";
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addNumber("Sigma", sigma, 2, "pixels");
        gd.addChoice("Method", METHODS, METHODS[method]);
        gd.addChoice("Border", Native.BORDERS, Native.BORDERS[border]);
        gd.addNumber("Value (constant border)", value, 2, "");
    }

    @Override
    boolean readFields(Params gd) {
        double s = gd.nextNumber();
        method = gd.nextChoiceIndex();
        border = gd.nextChoiceIndex();
        value = gd.nextNumber();
        if (gd.invalidNumber() || !(s > 0) || Double.isInfinite(s)) {
            Tessera.error(title(), "sigma must be a finite number > 0");
            return false;
        }
        sigma = s;
        return true;
    }

    @Override
    void filter(Object src, Object dst, int w, int h) {
        Native.gaussianBlur(src, dst, w, h, sigma, -1, method, border, (float) value, Tessera.backend);
    }
}
