package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.Menus;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.Assert.assertTrue;

/**
 * ImageJ in a headless JVM, with Tessera_.jar's commands installed.
 *
 * <p>ImageJ 1.x (without Fiji's patches) builds its command table while it builds the AWT
 * menu bar, which a headless JVM cannot do; {@code IJ.run} would then throw
 * {@code HeadlessException}. So this helper fills the same table ({@code Menus.pluginsTable},
 * the one {@code IJ.run} looks commands up in) from the two files ImageJ itself reads:
 * {@code IJ_Props.txt} inside ij.jar (the built-in commands) and {@code plugins.config}
 * inside Tessera_.jar. After that {@code IJ.run(imp, "Command", "options")} goes through
 * ImageJ's ordinary dispatch: PlugInFilterRunner, macro options, the plugin's dialog code.
 */
final class IjHeadless {
    private static final Pattern ENTRY = Pattern.compile("^\\s*[^#=\\s]+\\s*=\\s*\"([^\"]+)\"\\s*,\\s*(\\S.*)$");
    private static final Pattern PLUGIN = Pattern.compile("^\\s*Plugins>Tessera\\s*,\\s*\"([^\"]+)\"\\s*,\\s*(\\S+)\\s*$");

    private static Map<String, String> builtIn, tessera;

    private IjHeadless() {}

    /** Installs the command table once per JVM. */
    static synchronized void setUp() throws Exception {
        if (tessera != null) return;
        assertTrue("the tests run in a headless JVM", java.awt.GraphicsEnvironment.isHeadless());
        builtIn = parse(IJ.class.getResourceAsStream("/IJ_Props.txt"), ENTRY);
        tessera = parse(IjHeadless.class.getResourceAsStream("/plugins.config"), PLUGIN);
        Hashtable<String, String> table = new Hashtable<>(builtIn);
        table.putAll(tessera);
        Field f = Menus.class.getDeclaredField("pluginsTable");
        f.setAccessible(true);
        f.set(null, table);
    }

    static Map<String, String> builtInCommands() {
        return builtIn;
    }

    static Map<String, String> tesseraCommands() {
        return tessera;
    }

    private static Map<String, String> parse(InputStream in, Pattern p) throws IOException {
        if (in == null) throw new IOException("resource missing");
        Map<String, String> m = new LinkedHashMap<>();
        try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null; ) {
                Matcher x = p.matcher(line);
                if (x.matches()) {
                    String cmd = x.group(1).replaceAll("\\[.*\\]$", "");
                    m.put(cmd, x.group(2).trim());
                }
            }
        }
        return m;
    }

    /** The shared real test data: {@code -Dtessera.data}, else ../shared/data. */
    static File data(String rel) {
        String dir = System.getProperty("tessera.data", "../shared/data");
        File f = new File(dir, rel);
        assertTrue("test data " + f + " is missing", f.isFile());
        return f;
    }

    static ImagePlus open(String rel) {
        ImagePlus imp = IJ.openImage(data(rel).getPath());
        assertTrue("ImageJ could not open " + rel, imp != null);
        return imp;
    }
}
