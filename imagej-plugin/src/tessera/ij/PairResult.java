package tessera.ij;

/** The outcome of {@link Native#registerPair}, built by the native side. */
public final class PairResult {
    /** Whether the pair registered (then {@link #skip} is null). */
    public final boolean ok;
    /** The moving frame's pixel (u, v) shows the reference at (u + x, v + y); NaN if skipped. */
    public final double x, y;
    /** Mean NCC of the vectors used (0 when none), and vectors used / templates placed. */
    public final double ncc, confidence;
    /** Vectors used, and templates placed. */
    public final int vectors, templates;
    /** NCC evaluations of all searches of the pair. */
    public final long evaluations;
    /** Why the pair was skipped, or null. */
    public final String skip;

    PairResult(boolean ok, double x, double y, double ncc, int vectors, int templates, double confidence, long evaluations,
               String skip) {
        this.ok = ok;
        this.x = x;
        this.y = y;
        this.ncc = ncc;
        this.vectors = vectors;
        this.templates = templates;
        this.confidence = confidence;
        this.evaluations = evaluations;
        this.skip = skip;
    }
}
