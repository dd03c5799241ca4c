package tessera.ij;

import org.junit.BeforeClass;
import org.junit.Test;

import java.util.Map;

import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

/** The jar's menu: every command is installed, none shadows an ImageJ command. */
public class PluginConfigTest {
    @BeforeClass
    public static void setUp() throws Exception {
        IjHeadless.setUp();
    }

    @Test
    public void noTesseraCommandShadowsABuiltInOne() {
        for (String cmd : IjHeadless.tesseraCommands().keySet())
            assertFalse("\"" + cmd + "\" would replace ImageJ's own command", IjHeadless.builtInCommands().containsKey(cmd));
    }

    @Test
    public void everyCommandClassExists() throws Exception {
        Map<String, String> m = IjHeadless.tesseraCommands();
        assertTrue(m.containsKey("Mean / Box Filter..."));
        for (String cls : m.values()) Class.forName(cls);
    }
}
