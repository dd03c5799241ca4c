package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.plugin.filter.ExtendedPlugInFilter;
import ij.plugin.filter.PlugInFilterRunner;

import java.util.HashMap;
import java.util.Map;

/**
 * What {@link InPlaceFilter} and {@link NewImageFilter} share: one native operation with a
 * dialog (its fields, then the backend) whose values are remembered for the session, run
 * slice by slice under ImageJ's {@link ExtendedPlugInFilter} protocol with a progress bar,
 * Esc between slices, and errors as {@code IJ.error} messages that stop the run.
 */
abstract class SliceFilter implements ExtendedPlugInFilter {
    /** The last values of the session per operation, from the native defaults at first. */
    private static final Map<String, Options> LAST = new HashMap<>();

    private final String title, op;
    private int nPasses = 1, pass;
    private boolean stopped;

    /** A filter shown as {@code title} in messages, running native operation {@code op}
     *  (its name for {@link Options#defaults}). */
    SliceFilter(String title, String op) {
        this.title = title;
        this.op = op;
    }

    /** The menu command, for messages. */
    final String title() {
        return title;
    }

    /** The operation's options: the last values of the session, the native defaults at first. */
    final Options last() {
        synchronized (LAST) {
            return LAST.computeIfAbsent(op, Options::defaults);
        }
    }

    /** Adds this filter's fields to the dialog. */
    abstract void addFields(Params gd, ImagePlus imp);

    /** Reads the fields back (in the order added); false when a value is unusable. */
    abstract boolean readFields(Params gd);

    /** The PlugInFilter flags (pixel types accepted, ...). */
    abstract int flags();

    @Override
    public int showDialog(ImagePlus imp, String command, PlugInFilterRunner pfr) {
        return Tessera.showFilterDialog(title, imp, this::addFields, this::readFields, this::flags);
    }

    @Override
    public void setNPasses(int nPasses) {
        this.nPasses = Math.max(1, nPasses);
        this.pass = 0;
    }

    /** Whether the run is over: stopped before, or by Esc now (said in the status bar). */
    final boolean stopped() {
        if (stopped) return true;
        if (IJ.escapePressed()) {
            stopped = true;
            IJ.showStatus(title + ": stopped by Esc after " + pass + " of " + nPasses + " slices");
            IJ.showProgress(1.0);
        }
        return stopped;
    }

    /** Whether the run was stopped (by Esc or an error). */
    final boolean wasStopped() {
        return stopped;
    }

    /** Stops the run on error {@code e}, shown as an {@code IJ.error} message. */
    final void fail(RuntimeException e) {
        stopped = true;
        Tessera.error(title, e);
    }

    /** One slice done: the progress bar moves on. */
    final void sliceDone() {
        pass++;
        IJ.showProgress(pass, nPasses);
    }
}
