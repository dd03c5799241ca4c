package tessera.ij;

import ij.process.ImageProcessor;

/** ImageJ pixels as gray floats, for the pure-Java NCC. */
final class Gray {
    private Gray() {}

    /**
     * The slice as floats: 8/16-bit unsigned values as they are, 32-bit as is, RGB as Rec.
     * 601 luma (0.299 R + 0.587 G + 0.114 B, unrounded), the weights the core registers
     * RGB frames on.
     */
    static float[] of(Object pixels) {
        if (pixels instanceof byte[]) {
            byte[] p = (byte[]) pixels;
            float[] f = new float[p.length];
            for (int i = 0; i < p.length; i++) f[i] = p[i] & 0xff;
            return f;
        }
        if (pixels instanceof short[]) {
            short[] p = (short[]) pixels;
            float[] f = new float[p.length];
            for (int i = 0; i < p.length; i++) f[i] = p[i] & 0xffff;
            return f;
        }
        if (pixels instanceof float[]) return (float[]) pixels;
        if (pixels instanceof int[]) {
            int[] p = (int[]) pixels;
            float[] f = new float[p.length];
            for (int i = 0; i < p.length; i++) {
                int c = p[i];
                f[i] = 0.299f * ((c >> 16) & 0xff) + 0.587f * ((c >> 8) & 0xff) + 0.114f * (c & 0xff);
            }
            return f;
        }
        throw new IllegalArgumentException("unsupported pixel array " + (pixels == null ? "null" : pixels.getClass().getSimpleName()));
    }

    static float[] of(ImageProcessor ip) {
        return of(ip.getPixels());
    }
}
