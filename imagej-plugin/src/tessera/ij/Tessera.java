package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.measure.Calibration;
import ij.process.ImageProcessor;
import ij.plugin.filter.PlugInFilter;
import java.util.concurrent.CancellationException;
import java.util.function.BiConsumer;
import java.util.function.Function;
import java.util.function.IntSupplier;
import java.util.function.Predicate;

/** Helpers shared by the menu actions: backend choice, error reporting. */
public final class Tessera {
    /** The dialogs' Help text (HTML shown by ImageJ itself; no web page is assumed). */
    static final String HELP_HTML = "<html><h2>Tessera</h2>"
        + "<p>Native (Rust, SIMD) and GPU implementations of tessera's operations.</p>"
        + "<p><b>Backend</b>: <i>auto</i> uses a usable CUDA GPU, else the CPU; <i>cpu</i>; "
        + "<i>cuda</i> is an error where no GPU is usable.</p>"
        + "<p>Every field is recorded by the macro recorder. The parameters, types and outputs "
        + "of each command are described in docs/imagej.md of the tessera sources; "
        + "<i>Plugins &gt; Tessera &gt; About Tessera...</i> shows the version and backends.</p></html>";
    static final String[] BACKENDS = {"auto", "cpu", "cuda"};

    /** The backend of the last dialog ("auto" until one was shown), remembered in the session. */
    static String backend = "auto";

    private static volatile String lastError;

    private Tessera() {}

    /** The last message shown through {@link #error}, or null (read by the tests). */
    public static String lastError() {
        return lastError;
    }

    static void clearLastError() {
        lastError = null;
    }

    static void addBackendChoice(Params gd) {
        gd.addChoice("Backend", BACKENDS, backend);
    }

    static void readBackendChoice(Params gd) {
        backend = gd.nextChoice();
    }

    /** The options of one native call: the remembered ones and the dialog's backend. */
    static String withBackend(Options o) {
        return o.copy().set("backend", backend).toString();
    }

    /** The dialogs' border names ("constant" takes the Value field); the native options
     *  spell reflect-101 "reflect101" and a constant "constant:V". */
    static final String[] BORDERS = {"reflect-101", "replicate", "constant", "normalize"};

    /** Adds the Border choice (among {@code names}) and its Value field, showing {@code o}'s
     *  border option. */
    static void addBorderFields(Params gd, Options o, String[] names) {
        String b = o.get("border");
        boolean constant = b.startsWith("constant:");
        gd.addChoice("Border", names, constant ? "constant" : b.equals("reflect101") ? "reflect-101" : b);
        gd.addNumber("Value (constant border)", constant ? Double.parseDouble(b.substring("constant:".length())) : 0, 2, "");
    }

    /** Reads the fields of {@link #addBorderFields} back into {@code o}'s border option. */
    static void readBorderFields(Params gd, Options o) {
        String b = gd.nextChoice();
        double value = gd.nextNumber();
        o.set("border", b.equals("constant") ? "constant:" + value : b);
    }

    /** The index of {@code option} among the dialog's {@code choices} (case aside). */
    static int choiceOf(String[] choices, String option) {
        for (int i = 0; i < choices.length; i++) if (choices[i].equalsIgnoreCase(option)) return i;
        throw new IllegalStateException("\"" + option + "\" is not among " + String.join(", ", choices));
    }

    /**
     * The dialog of every filter action: its own fields, then the backend choice. Returns
     * DONE when cancelled or when a field is invalid (reported with IJ.error), else the
     * filter flags for {@code imp} (for a stack, ImageJ asks whether to process all slices).
     */
    static int showFilterDialog(String title, ImagePlus imp, BiConsumer<Params, ImagePlus> addFields,
                                Predicate<Params> readFields, IntSupplier flags) {
        Params gd = new Params(title);
        addFields.accept(gd, imp);
        addBackendChoice(gd);
        if (!gd.show()) return PlugInFilter.DONE;
        try {
            if (!readFields.test(gd)) return PlugInFilter.DONE;
            readBackendChoice(gd);
        } catch (IllegalArgumentException e) {
            error(title, e);
            return PlugInFilter.DONE;
        }
        return Params.stackFlags(imp, flags.getAsInt());
    }

    /** What the status bar says when a run is cancelled after {@code done} of {@code total} steps. */
    interface CancelledStatus {
        String say(int done, int total);
    }

    /**
     * Runs a long native call that reports progress ({@link Native.Progress}): a progress bar
     * follows it and Esc stops it. Returns the call's result; null when it failed (shown with
     * {@link #error} under {@code title}) or was cancelled (no error dialog: the status bar
     * says {@code cancelled}, and the Esc flag is reset).
     */
    static <T> T withProgress(String title, Function<Native.Progress, T> call, CancelledStatus cancelled) {
        int[] done = {0, 0};
        try {
            return call.apply((d, total) -> {
                done[0] = d;
                done[1] = total;
                IJ.showProgress(d, total);
                return !IJ.escapePressed();
            });
        } catch (CancellationException e) {
            IJ.resetEscape();
            IJ.showStatus(cancelled.say(done[0], done[1]));
            return null;
        } catch (RuntimeException e) {
            error(title, e);
            return null;
        } finally {
            IJ.showProgress(1.0);
        }
    }

    /**
     * A new image of a native canvas ({@code pixels}, {@code w x h}, of {@code like}'s type),
     * with {@code like}'s spatial calibration whose origin is moved so that the reference
     * frame or tile keeps its coordinates: canvas pixel (X, Y) shows the reference's
     * (X + originX, Y + originY).
     */
    static ImagePlus canvasImage(String title, ImagePlus like, Object pixels, int w, int h, int originX, int originY) {
        ImageProcessor ip = like.getProcessor().createProcessor(w, h);
        ip.setPixels(pixels);
        ip.resetMinAndMax();
        ImagePlus imp = new ImagePlus(title, ip);
        Calibration cal = like.getCalibration().copy();
        cal.xOrigin = cal.xOrigin - originX;
        cal.yOrigin = cal.yOrigin - originY;
        imp.setCalibration(cal);
        return imp;
    }

    /** Shows an ImageJ error message for a failed native call (never a stack trace). */
    static void error(String title, Throwable e) {
        String msg = e.getMessage() != null ? e.getMessage() : e.toString();
        error(title, msg);
    }

    static void error(String title, String msg) {
        lastError = msg;
        IJ.error("Tessera: " + title, msg);
    }
}
