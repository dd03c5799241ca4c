package tessera.ij;

/** The outcome of {@link Native#registerPair}, built by the native side. */
public final class PairResult {
    /** Whether the pair registered (then {@link #skip} is null). */
    public final boolean ok;
    /** The pair's motion: the moving frame's pixel (u, v) shows the reference at
     *  (x, y) + scale R(angle) (u, v), R(a) = [[cos a, -sin a], [sin a, cos a]] (x right,
     *  y down); without a turn at (u + x, v + y). All NaN if skipped. */
    public final double x, y;
    /** The rotation in degrees (0 with {@code motion=translation} or when no turn is
     *  significant), and the scale (1 unless {@code fit-scale}); NaN if skipped. */
    public final double angle, scale;
    /** Mean NCC of the vectors used (0 when none), and vectors used / templates placed. */
    public final double ncc, confidence;
    /** Vectors used, and templates placed. */
    public final int vectors, templates;
    /** NCC evaluations of all searches of the pair. */
    public final long evaluations;
    /** Why the pair was skipped, or null. */
    public final String skip;

    PairResult(boolean ok, double x, double y, double angle, double scale, double ncc, int vectors, int templates,
               double confidence, long evaluations, String skip) {
        this.ok = ok;
        this.x = x;
        this.y = y;
        this.angle = angle;
        this.scale = scale;
        this.ncc = ncc;
        this.vectors = vectors;
        this.templates = templates;
        this.confidence = confidence;
        this.evaluations = evaluations;
        this.skip = skip;
    }
}
