package tessera.ij;

import ij.ImagePlus;

/**
 * Plugins &gt; Tessera &gt; Mean / Box Filter...: the mean over a rectangular window in O(1)
 * per pixel whatever its size. 8-bit, 16-bit, 32-bit and RGB (per channel), whole stacks.
 * Macro: {@code run("Mean / Box Filter...", "width=15 height=15 border=reflect-101 value=0 backend=auto")}.
 */
public class MeanFilterPlugin extends InPlaceFilter {
    private static int width = 3, height = 3, border = Native.BORDER_REFLECT101;
    private static double value = 0;

    @Override
    String title() {
        return "Mean / Box Filter";
    }

    @Override
    void addFields(Params gd, ImagePlus imp) {
        gd.addNumber("Width", width, 0, "pixels");
        gd.addNumber("Height", height, 0, "pixels");
        gd.addChoice("Border", Native.BORDERS, Native.BORDERS[border]);
        gd.addNumber("Value (constant border)", value, 2, "");
    }

    @Override
    boolean readFields(Params gd) {
        double w = gd.nextNumber(), h = gd.nextNumber();
        border = gd.nextChoiceIndex();
        value = gd.nextNumber();
        if (gd.invalidNumber() || w != Math.rint(w) || h != Math.rint(h) || w < 1 || h < 1) {
            Tessera.error(title(), "the window width and height must be whole numbers >= 1");
            return false;
        }
        width = (int) w;
        height = (int) h;
        return true;
    }

    @Override
    void filter(Object src, Object dst, int w, int h) {
        Native.meanFilter(src, dst, w, h, width, height, border, (float) value, Tessera.backend);
    }
}
