package tessera.ij;

/** The report of a {@link Native#glare} run, built by the native side. */
public final class GlareResult {
    /** Spots kept. */
    public final int spots;
    /** Pixels in the mask. */
    public final long pixels;
    /** Brightness and contrast thresholds used, as fractions of the full scale. */
    public final float brightness, minContrast;
    /** The full scale (255, 65535, or the float image's range). */
    public final float fullScale;
    /** All of the above in one line, as the plugin logs it. */
    public final String summary;

    GlareResult(int spots, long pixels, float brightness, float minContrast, float fullScale, String summary) {
        this.spots = spots;
        this.pixels = pixels;
        this.brightness = brightness;
        this.minContrast = minContrast;
        this.fullScale = fullScale;
        this.summary = summary;
    }

    @Override
    public String toString() {
        return summary;
    }
}
