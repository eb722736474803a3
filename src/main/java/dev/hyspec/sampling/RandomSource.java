package dev.hyspec.sampling;

import java.util.concurrent.ThreadLocalRandom;

/**
 * A small per-request random generator (vLLM's per-request {@code torch.Generator}).
 *
 * <p>The algorithm is SplitMix64 (Steele, Lea &amp; Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014): a 64-bit counter advanced by the golden gamma and finalised by
 * Stafford's mix13. It is written out here rather than borrowed from {@code SplittableRandom}
 * so that the stream of a seed is fixed by this file alone: the same seed gives the same draws on
 * every run, JVM and platform.
 *
 * <p>Not thread-safe; one instance belongs to one request and is used on the engine thread.
 */
public final class RandomSource {
    private static final long GOLDEN_GAMMA = 0x9e3779b97f4a7c15L;
    private static final double DOUBLE_UNIT = 0x1.0p-53;

    private final long seed;
    private long state;

    private RandomSource(long seed, long state) {
        this.seed = seed;
        this.state = state;
    }

    /** A generator whose stream depends only on {@code seed}. */
    public static RandomSource seeded(long seed) {
        return new RandomSource(seed, seed);
    }

    /** A generator with a fresh random seed (readable through {@link #seed()} for reproduction). */
    public static RandomSource unseeded() {
        return seeded(ThreadLocalRandom.current().nextLong());
    }

    /** The generator for a request: seeded from {@link SamplingParams#seed()}, else random. */
    public static RandomSource forParams(SamplingParams params) {
        Long s = params.seed();
        return s == null ? unseeded() : seeded(s);
    }

    /** The seed this generator started from. */
    public long seed() {
        return seed;
    }

    /** An independent copy at the current position (the copy yields the same future draws). */
    public RandomSource copy() {
        return new RandomSource(seed, state);
    }

    /** The next 64 uniformly random bits. */
    public long nextLong() {
        long z = (state += GOLDEN_GAMMA);
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    /** A uniform double in {@code [0, 1)} on the grid of multiples of 2^-53. */
    public double nextDouble() {
        return (nextLong() >>> 11) * DOUBLE_UNIT;
    }

    /**
     * A uniform double in {@code (0, 1]} on the grid of multiples of 2^-53. Rejection sampling
     * accepts when {@code p(d) >= u·q(d)}: a {@code u} that can never be 0 never accepts a token
     * the target gives probability 0, and {@code u <= 1} always accepts when {@code p >= q}.
     */
    public double nextOpenClosedDouble() {
        return ((nextLong() >>> 11) + 1) * DOUBLE_UNIT;
    }

    /** A uniform int in {@code [0, bound)}. */
    public int nextInt(int bound) {
        if (bound <= 0) {
            throw new IllegalArgumentException("bound must be positive, got " + bound);
        }
        // Lemire's multiply-shift with rejection: unbiased.
        long m = (nextLong() >>> 32) * bound;
        long low = m & 0xffffffffL;
        if (low < bound) {
            long threshold = (0x1_0000_0000L - bound) % bound;
            while (low < threshold) {
                m = (nextLong() >>> 32) * bound;
                low = m & 0xffffffffL;
            }
        }
        return (int) (m >>> 32);
    }

    @Override
    public String toString() {
        return "RandomSource[seed=" + seed + "]";
    }
}
