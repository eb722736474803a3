package dev.hyspec.bench;

import java.util.Random;

/**
 * Standard normal floats drawn once and handed out from random offsets (cyclically), so that the
 * benchmark's large inputs cost an array copy rather than a draw per element.
 */
final class RandomPool {
    private final float[] pool;
    private final Random random;

    RandomPool(long seed, int size) {
        random = new Random(seed);
        pool = new float[size];
        for (int i = 0; i < size; i++) {
            pool[i] = (float) random.nextGaussian();
        }
    }

    /** {@code n} values, starting at a random place in the pool. */
    float[] take(int n) {
        float[] out = new float[n];
        int at = random.nextInt(pool.length);
        for (int done = 0; done < n; ) {
            int len = Math.min(n - done, pool.length - at);
            System.arraycopy(pool, at, out, done, len);
            done += len;
            at = 0;
        }
        return out;
    }

    /** {@code n} values scaled by {@code scale}. */
    float[] take(int n, float scale) {
        float[] out = take(n);
        for (int i = 0; i < n; i++) {
            out[i] *= scale;
        }
        return out;
    }
}
