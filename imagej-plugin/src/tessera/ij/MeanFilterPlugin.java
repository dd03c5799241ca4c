package tessera.ij;

import ij.ImagePlus;

/**
 * Plugins &gt; Tessera &gt; Mean / Box Filter...: the mean over a rectangular window in O(1)
 * per pixel whatever its size. 8-bit, 16-bit, 32-bit and RGB (per channel), whole stacks.
 * Macro: {@code run("Mean / Box Filter...", "width=15 height=15 border=reflect-101 value=0 backend=auto")}.
 */
public class MeanFilterPlugin extends InPlaceFilter {
    public MeanFilterPlugin() {
        super("Mean / Box Filter", "mean");
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addNumber("Width", last().integer("width"), 0, "pixels");
        gd.addNumber("Height", last().integer("height"), 0, "pixels");
        Tessera.addBorderFields(gd, last(), Tessera.BORDERS);
    }

    @Override
    boolean readFields(Params gd) {
        double w = gd.nextNumber(), h = gd.nextNumber();
        Tessera.readBorderFields(gd, last());
        if (gd.invalidNumber() || w != Math.rint(w) || h != Math.rint(h) || w < 1 || h < 1) {
            Tessera.error(title(), "the window width and height must be whole numbers >= 1");
            return false;
        }
        last().set("width", (int) w).set("height", (int) h);
        return true;
    }

    @Override
    void filter(Object src, Object dst, int w, int h) {
        Native.meanFilter(src, dst, w, h, Tessera.withBackend(last()));
    }
}
