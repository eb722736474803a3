package dev.hyspec.backend;

import dev.hyspec.checkpoint.DType;

/**
 * A counter-based uniform generator: element {@code i} of stream {@code seed} is a pure function of
 * the two, so a GPU thread computes its element without any shared state and every backend gets the
 * same values ({@code random.cu} mirrors this class bit for bit).
 *
 * <p>{@code u(seed, i)} is the top 24 bits of SplitMix64 (Steele et al. 2014) applied to
 * {@code seed + (i + 1)·φ}, divided by {@code 2^24}: a float in {@code [0, 1)}. A value in
 * {@code [center − scale, center + scale)} is {@code fma(scale, 2u − 1, center)}: one rounding, and
 * {@code 2u − 1} is exact, so the float is the same wherever it is computed.
 */
public final class HashUniform {
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private HashUniform() {}

    /** SplitMix64's finaliser. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** {@code u(seed, i)} in {@code [0, 1)}. */
    public static float uniform(long seed, long i) {
        return (mix(seed + (i + 1) * GOLDEN) >>> 40) * 0x1p-24f;
    }

    /** {@code center + scale·(2u − 1)}, in {@code [center − scale, center + scale)}. */
    public static float value(long seed, long i, float center, float scale) {
        return Math.fma(scale, 2f * uniform(seed, i) - 1f, center);
    }

    /** {@link #value} rounded to bfloat16 (nearest even): the bits a random weight stores. */
    public static short bf16(long seed, long i, float center, float scale) {
        return DType.floatToBf16(value(seed, i, center, scale));
    }

    /** A seed for the stream named {@code name} under {@code seed} (a weight's own stream). */
    public static long seed(long seed, String name) {
        long h = seed;
        for (int c = 0; c < name.length(); c++) {
            h = mix(h + (name.charAt(c) + 1) * GOLDEN);
        }
        return h;
    }
}
