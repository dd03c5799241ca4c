package tessera.ij;

import ij.ImagePlus;

/**
 * Plugins &gt; Tessera &gt; Gaussian Blur (Tessera)...: (not "Gaussian Blur...", which would shadow ImageJ's own command of that name) Gaussian of standard deviation sigma (pixels),
 * FIR or recursive IIR. 8-bit, 16-bit, 32-bit and RGB (per channel), whole stacks.
 * Macro: {@code run("Gaussian Blur (Tessera)...", "sigma=2 method=auto border=reflect-101 value=0 backend=auto")}.
 */
public class GaussianPlugin extends InPlaceFilter {
    static final String[] METHODS = {"auto", "FIR", "IIR"};
    public GaussianPlugin() {
        super("Gaussian Blur", "gauss");
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addNumber("Sigma", last().number("sigma"), 2, "pixels");
        gd.addChoice("Method", METHODS, METHODS[Tessera.choiceOf(METHODS, last().get("method"))]);
        Tessera.addBorderFields(gd, last(), Tessera.BORDERS);
    }

    @Override
    boolean readFields(Params gd) {
        double s = gd.nextNumber();
        String method = gd.nextChoice().toLowerCase(java.util.Locale.ROOT);
        Tessera.readBorderFields(gd, last());
        if (gd.invalidNumber() || !(s > 0) || Double.isInfinite(s)) {
            Tessera.error(title(), "sigma must be a finite number > 0");
            return false;
        }
        last().set("sigma", s).set("method", method);
        return true;
    }

    @Override
    void filter(Object src, Object dst, int w, int h) {
        Native.gaussianBlur(src, dst, w, h, Tessera.withBackend(last()));
    }
}
