package tessera.ij;

/** The outcome of {@link Native#stitchGrid}, built by the native side. */
public final class GridResult {
    /** The mosaic's pixels (same array type as the tiles; RGB opaque): the whole mosaic, or,
     *  when it was streamed to {@link #omePath}, its pyramid level {@link #level}. */
    public final Object pixels;
    /** The size of {@link #pixels}, and the tile-1 coordinates of the full-resolution
     *  mosaic's pixel (0, 0). */
    public final int width, height, originX, originY;
    /** The pyramidal OME-TIFF the mosaic was streamed to, or null (the mosaic is whole). */
    public final String omePath;
    /** The pyramid level held by {@link #pixels}: the full-resolution mosaic halved (2x2 mean,
     *  rounding the size up) this many times; 0 when whole. */
    public final int level;
    /** The full-resolution mosaic's size. */
    public final int fullWidth, fullHeight;
    /** The downsampling of {@link #pixels}: 2^{@link #level}. */
    public int factor() {
        return 1 << level;
    }

    /** With channels and time points: every plane's pixels (same type and size as
     *  {@link #pixels}, which is the first), channel by channel within each time point
     *  (ImageJ's hyperstack order); null for a single plane. */
    public final Object[] planes;
    /** The channels and time points of {@link #planes} (1 and 1 for a single plane). */
    public final int channels, timePoints;

    /** One record per tile, in acquisition order (with planes: the tiles of time point 0 on
     *  the registration channel). */
    public final Tile[] tiles;
    /** One record per neighbouring pair of tiles. */
    public final Pair[] pairs;

    GridResult(Object pixels, int width, int height, int originX, int originY, Tile[] tiles, Pair[] pairs, String omePath, int level,
               int fullWidth, int fullHeight, Object[] planes, int channels, int timePoints) {
        this.planes = planes;
        this.channels = channels;
        this.timePoints = timePoints;
        this.omePath = omePath;
        this.level = level;
        this.fullWidth = fullWidth;
        this.fullHeight = fullHeight;
        this.pixels = pixels;
        this.width = width;
        this.height = height;
        this.originX = originX;
        this.originY = originY;
        this.tiles = tiles;
        this.pairs = pairs;
    }

    /** Where one tile went. */
    public static final class Tile {
        /** Position in tile-1 coordinates (tile i's pixel (u, v) shows what tile 1 shows at
         *  (u + x, v + y)). */
        public final double x, y;
        /** "ok" (joined to the mosaic by accepted pairs), "detached" (in a group of tiles
         *  that no accepted pair joins to the mosaic: placed as a whole by the fitted stage
         *  model), "nominal" (no accepted pair reaches it: where the stage model puts it) or
         *  "skipped" (left out, see {@link #reason}). */
        public final String status;
        /** The largest residual of its accepted pairs after the solve, pixels; NaN when none. */
        public final double residual;
        /** Why it was left out, or null. */
        public final String reason;

        Tile(double x, double y, String status, double residual, String reason) {
            this.x = x;
            this.y = y;
            this.status = status;
            this.residual = residual;
            this.reason = reason;
        }
    }

    /** One neighbouring pair: tile {@link #b}'s offset from tile {@link #a} (0-based). */
    public static final class Pair {
        public final int a, b;
        /** Whether the pair's offset is used (then {@link #reason} is null). */
        public final boolean accepted;
        /** The measured offset; NaN when rejected. */
        public final double dx, dy;
        /** Mean NCC of the vectors used, and their mean margin over the acceptance threshold. */
        public final double ncc, margin;
        /** Vectors used. */
        public final int vectors;
        /** |position[b] - position[a] - offset| after the solve; NaN when rejected. */
        public final double residual;
        /** Why the pair was rejected, or null. */
        public final String reason;

        Pair(int a, int b, boolean accepted, double dx, double dy, double ncc, double margin, int vectors, double residual,
             String reason) {
            this.a = a;
            this.b = b;
            this.accepted = accepted;
            this.dx = dx;
            this.dy = dy;
            this.ncc = ncc;
            this.margin = margin;
            this.vectors = vectors;
            this.residual = residual;
            this.reason = reason;
        }
    }
}
