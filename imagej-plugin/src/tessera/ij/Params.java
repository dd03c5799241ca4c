package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.Macro;
import ij.gui.GenericDialog;

import java.awt.GraphicsEnvironment;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A plugin's parameters: a {@link GenericDialog} in a normal ImageJ (so the macro recorder
 * records it and {@code run("...", "options")} replays it), and, in a headless JVM where
 * ImageJ 1.x cannot create any AWT dialog, the same fields read from the macro options with
 * the GenericDialog's own key rule (the label's first word, lower case) and its defaults
 * when a key is absent.
 */
final class Params {
    private final GenericDialog gd;
    private final String options;
    private final List<Object[]> fields = new ArrayList<>();
    private int next;
    private boolean invalid;

    Params(String title) {
        if (GraphicsEnvironment.isHeadless()) {
            gd = null;
            String o = Macro.getOptions();
            options = o == null ? "" : o;
        } else {
            gd = new GenericDialog(title);
            options = null;
        }
    }

    static boolean headless() {
        return GraphicsEnvironment.isHeadless();
    }

    private static String key(String label) {
        String k = label.trim();
        int sp = k.indexOf(' ');
        if (sp >= 0) k = k.substring(0, sp);
        k = k.replace(":", "");
        return k.toLowerCase(Locale.US);
    }

    void addNumber(String label, double def, int digits, String units) {
        if (gd != null) gd.addNumericField(label, def, digits, 6, units);
        else fields.add(new Object[] {label, def});
    }

    void addChoice(String label, String[] items, String def) {
        if (gd != null) gd.addChoice(label, items, def);
        else fields.add(new Object[] {label, def, items});
    }

    void addString(String label, String def) {
        if (gd != null) gd.addStringField(label, def, 16);
        else fields.add(new Object[] {label, def});
    }

    /** A folder path (with a Browse button in the dialog); read back with {@link #nextString}. */
    void addDirectory(String label, String def) {
        if (gd != null) gd.addDirectoryField(label, def, 30);
        else fields.add(new Object[] {label, def});
    }

    String nextString() {
        if (gd != null) return gd.getNextString();
        Object[] f = field();
        String v = value((String) f[0]);
        return v == null ? (String) f[1] : v;
    }

    void addCheckbox(String label, boolean def) {
        if (gd != null) gd.addCheckbox(label, def);
        else fields.add(new Object[] {label, def});
    }

    void addMessage(String text) {
        if (gd != null) gd.addMessage(text);
    }

    /** Shows the dialog; false when the user cancelled it. Headless: always true. */
    boolean show() {
        if (gd == null) return true;
        gd.addHelp(Tessera.HELP_HTML);
        gd.showDialog();
        return !gd.wasCanceled();
    }

    private Object[] field() {
        if (next >= fields.size()) throw new IllegalStateException("more fields read than added");
        return fields.get(next++);
    }

    private String value(String label) {
        return Macro.getValue(options, key(label), null);
    }

    double nextNumber() {
        if (gd != null) return gd.getNextNumber();
        Object[] f = field();
        String v = value((String) f[0]);
        if (v == null) return (Double) f[1];
        try {
            return Double.parseDouble(v);
        } catch (NumberFormatException e) {
            invalid = true;
            return Double.NaN;
        }
    }

    /** The chosen item's index; an item not in the list is an IllegalArgumentException. */
    int nextChoiceIndex() {
        if (gd != null) return gd.getNextChoiceIndex();
        Object[] f = field();
        String[] items = (String[]) f[2];
        String v = value((String) f[0]);
        if (v == null) v = (String) f[1];
        for (int i = 0; i < items.length; i++) if (items[i].equals(v)) return i;
        throw new IllegalArgumentException("\"" + v + "\" is not a valid choice for \"" + f[0] + "\" (one of: " + String.join(", ", items) + ")");
    }

    String nextChoice() {
        if (gd != null) return gd.getNextChoice();
        int before = next;
        int i = nextChoiceIndex();
        return ((String[]) fields.get(before)[2])[i];
    }

    boolean nextBoolean() {
        if (gd != null) return gd.getNextBoolean();
        Object[] f = field();
        if (options.isEmpty()) return (Boolean) f[1];
        return (" " + options + " ").contains(" " + key((String) f[0]) + " ");
    }

    /** True when a number field held something that is not a number. */
    boolean invalidNumber() {
        return gd != null ? gd.invalidNumber() : invalid;
    }

    /**
     * {@code flags}, plus DOES_STACKS when the whole stack is to be processed: ImageJ's
     * "Process all N images?" question ({@code IJ.setupDialog}, which reads the macro
     * keyword "stack" itself in a macro), or headless that keyword; DONE when cancelled.
     */
    static int stackFlags(ImagePlus imp, int flags) {
        if (!headless()) return IJ.setupDialog(imp, flags);
        if (imp.getStackSize() > 1) {
            String o = Macro.getOptions();
            if (o != null && (" " + o + " ").contains(" stack ")) return flags | ij.plugin.filter.PlugInFilter.DOES_STACKS;
        }
        return flags;
    }
}
