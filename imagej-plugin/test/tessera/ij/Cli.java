package tessera.ij;

import ij.IJ;
import ij.ImagePlus;
import ij.io.FileSaver;
import ij.process.ImageProcessor;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;

/** Runs the Rust command-line program {@code tessera} on an image written from ImageJ. */
final class Cli {
    private Cli() {}

    static File binary() {
        String p = System.getProperty("tessera.cli");
        assertNotNull("-Dtessera.cli (the tessera binary) is not set; test.sh sets it", p);
        File f = new File(p);
        assertTrue("tessera CLI missing at " + f, f.canExecute());
        return f;
    }

    /**
     * Saves {@code ip} as a TIFF, runs {@code tessera <args...> in.tif -o out.tif} and opens
     * the result with ImageJ.
     */
    static ImageProcessor run(ImageProcessor ip, String... args) throws IOException, InterruptedException {
        return runWith(ip, null, args);
    }

    /** As {@link #run}, the CLI also writing a mask ({@code --mask mask.tif}) into {@code mask[0]}. */
    static ImageProcessor runWithMask(ImageProcessor ip, ImageProcessor[] mask, String... args) throws IOException, InterruptedException {
        return runWith(ip, mask, args);
    }

    private static ImageProcessor runWith(ImageProcessor ip, ImageProcessor[] mask, String... args) throws IOException, InterruptedException {
        File dir = Files.createTempDirectory("tessera-cli").toFile();
        File in = new File(dir, "in.tif"), out = new File(dir, "out.tif"), maskFile = new File(dir, "mask.tif");
        assertTrue(new FileSaver(new ImagePlus("in", ip.duplicate())).saveAsTiff(in.getPath()));
        List<String> cmd = new ArrayList<>();
        cmd.add(binary().getPath());
        cmd.addAll(Arrays.asList(args));
        cmd.add(in.getPath());
        cmd.add("-o");
        cmd.add(out.getPath());
        if (mask != null) {
            cmd.add("--mask");
            cmd.add(maskFile.getPath());
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals("tessera " + String.join(" ", args) + " failed: " + log, 0, p.waitFor());
        ImagePlus res = IJ.openImage(out.getPath());
        assertNotNull("ImageJ could not read the CLI's output " + out, res);
        ImageProcessor r = res.getProcessor();
        if (mask != null) {
            ImagePlus m = IJ.openImage(maskFile.getPath());
            assertNotNull("ImageJ could not read the CLI's mask " + maskFile, m);
            mask[0] = m.getProcessor();
            maskFile.delete();
        }
        in.delete();
        out.delete();
        dir.delete();
        return r;
    }
}
