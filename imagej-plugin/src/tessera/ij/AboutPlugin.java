package tessera.ij;

import ij.IJ;
import ij.plugin.PlugIn;

/** Plugins &gt; Tessera &gt; About Tessera...: library version, backends, where it was loaded from. */
public class AboutPlugin implements PlugIn {
    @Override
    public void run(String arg) {
        try {
            String msg = Native.version() + "\nbackends: " + String.join(", ", Native.backends())
                    + "\nlibrary: " + Native.libraryPath();
            IJ.log(msg);
            if (!IJ.isMacro()) IJ.showMessage("About Tessera", msg);
        } catch (RuntimeException e) {
            Tessera.error("About", e);
        }
    }
}
