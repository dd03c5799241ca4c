package tessera.ij;

/** The outcome of {@link Native#stitch}, built by the native side. */
public final class StitchResult {
    /** The canvas pixels (same array type as the frames; RGB opaque). */
    public final Object pixels;
    /** The canvas size, and the frame-0 coordinates of its pixel (0, 0). */
    public final int width, height, originX, originY;
    /** One record per frame, in the frames' order. */
    public final Frame[] frames;

    StitchResult(Object pixels, int width, int height, int originX, int originY, Frame[] frames) {
        this.pixels = pixels;
        this.width = width;
        this.height = height;
        this.originX = originX;
        this.originY = originY;
        this.frames = frames;
    }

    /** What happened to one frame. */
    public static final class Frame {
        /** Whether the frame registered into the panorama (then {@link #reason} is null). */
        public final boolean ok;
        /** Whether it registered on an island the panorama does not hold (a stretch the run
         *  reached after losing its way, joined to nothing): its pose is then relative to the
         *  island's first frame. */
        public final boolean onIsland;
        /** The island it registered on, by its first frame (1-based), and the keyframe of
         *  another island it joined through (1-based); 0 where none. */
        public final int island, joined;
        /** Pose in the reference frame's coordinates (frame 0 unless it registered with
         *  nothing): frame i's pixel (u, v) shows what the reference shows at
         *  (x, y) + scale R(angle) (u, v), R(a) = [[cos a, -sin a], [sin a, cos a]] (x right,
         *  y down); without a turn at (u + x, v + y). NaN for a skipped frame; relative to its
         *  island's first frame for a frame {@link #onIsland}. */
        public final double x, y;
        /** The rotation in degrees, and the scale (1 unless {@code fit-scale}); NaN for a
         *  skipped frame. */
        public final double angle, scale;
        /** Mean NCC of the vectors used, and vectors used / templates placed. */
        public final double ncc, confidence;
        /** Vectors used. */
        public final int vectors;
        /** Overlap quality against the previous frame, and on a 5 x 5 grid; NaN when none. */
        public final double quality, qualityGrid;
        /** Why the frame was skipped, or null. */
        public final String reason;

        Frame(boolean ok, boolean onIsland, int island, int joined, double x, double y, double angle, double scale, double ncc,
              int vectors, double confidence, double quality, double qualityGrid, String reason) {
            this.ok = ok;
            this.onIsland = onIsland;
            this.island = island;
            this.joined = joined;
            this.x = x;
            this.y = y;
            this.angle = angle;
            this.scale = scale;
            this.ncc = ncc;
            this.vectors = vectors;
            this.confidence = confidence;
            this.quality = quality;
            this.qualityGrid = qualityGrid;
            this.reason = reason;
        }
    }
}
