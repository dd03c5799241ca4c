package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.macro.Interpreter;
import ij.measure.ResultsTable;
import org.junit.Before;
import org.junit.Test;

import static org.hamcrest.CoreMatchers.containsString;
import static org.hamcrest.MatcherAssert.assertThat;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

/** Plugins > Tessera > Benchmark...: Java and native registration agree on a known path. */
public class BenchmarkPluginTest extends ConesFixture {
    @Before
    public void clear() {
        Tessera.clearLastError();
        Interpreter.batchMode = false;
    }

    @Test
    public void javaAndCpuFindTheSamePath() {
        ImagePlus seq = PanoramaPluginTest.sequence(cones.convertToByteProcessor(false), "bench");
        ResultsTable rt = BenchmarkPlugin.benchmark(seq, 25, 6, 0.85, 16, 1);
        assertEquals("java", rt.getStringValue("Backend", 0));
        assertEquals("cpu", rt.getStringValue("Backend", 1));
        int n = PanoramaPluginTest.PATH.length;
        assertEquals(n, (int) rt.getValue("Frames registered", 0));
        assertEquals(n, (int) rt.getValue("Frames registered", 1));
        // Integer peaks on an integer path; the native consensus averages the agreeing
        // vectors (within 1 px), the Java one takes their median: within half a pixel.
        assertTrue(rt.getValue("Max |position - Java| (px)", 1) < 0.5);
        assertTrue(rt.getValue("Time (ms)", 0) > 0 && rt.getValue("Time (ms)", 1) > 0);
        if (!Native.hasBackend("cuda")) assertThat(rt.getStringValue("Note", 2), containsString("no CUDA"));
    }

    @Test
    public void menuCommandRunsAndSingleSliceIsAnError() {
        ImagePlus seq = PanoramaPluginTest.sequence(cones, "benchRGB");
        IJ.run(seq, "Benchmark...", "rsz=25 cthresh=0.85 npts=6 radius=16 repeats=1");
        assertNull(Tessera.lastError());
        IJ.run(new ImagePlus("one", cones.duplicate()), "Benchmark...", "rsz=25 cthresh=0.85 npts=6 radius=16 repeats=1");
        assertThat(Tessera.lastError(), containsString("at least 2 frames"));
    }
}
