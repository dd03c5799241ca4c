package tessera.ij;

/** The counts of a {@link Native#stereoSgm} run, built by the native side. */
public final class StereoResult {
    /** Pixels with a disparity; invalidated by the uniqueness test; by the left-right check;
     *  given one by hole filling. */
    public final long valid, rejectedUniqueness, rejectedLr, filled;
    /** Tiles (or bands) the image was processed in. */
    public final int tiles;
    /** The penalties used (after the cost's defaults). */
    public final int p1, p2;
    /** All of the above in one line, as the plugin shows it. */
    public final String summary;

    StereoResult(long valid, long rejectedUniqueness, long rejectedLr, long filled, int tiles, int p1, int p2, String summary) {
        this.valid = valid;
        this.rejectedUniqueness = rejectedUniqueness;
        this.rejectedLr = rejectedLr;
        this.filled = filled;
        this.tiles = tiles;
        this.p1 = p1;
        this.p2 = p2;
        this.summary = summary;
    }

    @Override
    public String toString() {
        return summary;
    }
}
