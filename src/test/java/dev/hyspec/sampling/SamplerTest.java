package dev.hyspec.sampling;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class SamplerTest {
    private static final float EPS = 1e-6f;
    private static final float LN2 = (float) Math.log(2);

    private final Sampler sampler = new Sampler();

    private static SamplingParams params(double temperature, int topK, double topP) {
        return new SamplingParams(temperature, topP, topK, null, 16, List.of(), false);
    }

    /** Logits whose softmax at temperature 1 is proportional to {@code weights}. */
    private static float[] logitsOf(double... weights) {
        float[] l = new float[weights.length];
        for (int i = 0; i < l.length; i++) {
            l[i] = (float) Math.log(weights[i]);
        }
        return l;
    }

    private static float[] normalized(double... weights) {
        double sum = Arrays.stream(weights).sum();
        float[] p = new float[weights.length];
        for (int i = 0; i < p.length; i++) {
            p[i] = (float) (weights[i] / sum);
        }
        return p;
    }

    // ---- greedy ------------------------------------------------------------------------------

    @Test
    void greedyIsOneHotAtArgmaxWithTiesToLowestIndex() {
        float[] logits = {1f, 5f, 5f, 2f, Float.NEGATIVE_INFINITY};
        assertArrayEquals(new float[] {0, 1, 0, 0, 0}, sampler.probs(logits, params(0.0, 0, 1.0)));
        // top-k / top-p do not change greedy.
        assertArrayEquals(new float[] {0, 1, 0, 0, 0}, sampler.probs(logits, params(0.0, 2, 0.1)));
        assertEquals(1, sampler.sample(logits, params(0.0, 0, 1.0), null));
        assertEquals(1, Sampler.argmax(logits));
        assertEquals(3, Sampler.argmax(new float[] {-3f, -2f, -1.5f, -1f}));
    }

    // ---- temperature -------------------------------------------------------------------------

    @Test
    void temperatureScalesLogitsBeforeSoftmax() {
        // weights 1, 4, 16 at T = 1
        float[] logits = {0f, 2 * LN2, 4 * LN2};
        assertArrayEquals(normalized(1, 4, 16), sampler.probs(logits, params(1.0, 0, 1.0)), EPS);
        // T = 2 halves the logits: weights 1, 2, 4
        assertArrayEquals(normalized(1, 2, 4), sampler.probs(logits, params(2.0, 0, 1.0)), EPS);
        // T = 0.5 doubles them: weights 1, 16, 256
        assertArrayEquals(normalized(1, 16, 256), sampler.probs(logits, params(0.5, 0, 1.0)), EPS);
    }

    @Test
    void softmaxIsShiftInvariantAndIgnoresMaskedTokens() {
        float[] logits = {1000f, 1000f + 2 * LN2, Float.NEGATIVE_INFINITY, 1000f + LN2};
        assertArrayEquals(normalized(1, 4, 0, 2), sampler.probs(logits, params(1.0, 0, 1.0)), 1e-4f);
    }

    // ---- top-k -------------------------------------------------------------------------------

    @Test
    void topKKeepsTheKLargestLogits() {
        float[] logits = logitsOf(3, 10, 1, 4, 2);
        assertArrayEquals(normalized(0, 10, 0, 4, 0), sampler.probs(logits, params(1.0, 2, 1.0)), EPS);
        assertArrayEquals(normalized(0, 1, 0, 0, 0), sampler.probs(logits, params(1.0, 1, 1.0)), EPS);
        assertArrayEquals(normalized(3, 10, 0, 4, 2), sampler.probs(logits, params(1.0, 4, 1.0)), EPS);
        // k >= V, 0 and -1 are "off"
        for (int off : new int[] {5, 6, 0, -1}) {
            assertArrayEquals(normalized(3, 10, 1, 4, 2), sampler.probs(logits, params(1.0, off, 1.0)), EPS);
        }
    }

    @Test
    void topKKeepsTiesAtTheThresholdLikeVllm() {
        float[] logits = {1f, 3f, 3f, 2f};
        assertArrayEquals(new float[] {0, 0.5f, 0.5f, 0}, sampler.probs(logits, params(1.0, 1, 1.0)), EPS);
    }

    @Test
    void kthLargestMatchesSorting() {
        RandomSource r = RandomSource.seeded(3);
        float[] v = new float[5000];
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) (r.nextDouble() * 20 - 10);
        }
        v[17] = v[18] = v[19] = 42f; // ties at the top
        float[] sorted = v.clone();
        Arrays.sort(sorted);
        for (int k : new int[] {1, 2, 3, 4, 10, 100, 4999}) {
            assertEquals(sorted[v.length - k], Sampler.kthLargest(v, k), "k=" + k);
        }
    }

    // ---- top-p -------------------------------------------------------------------------------

    @Test
    void topPKeepsTheSmallestPrefixReachingP() {
        // probabilities 0.05, 0.10, 0.15, 0.30, 0.40 in shuffled positions
        float[] logits = logitsOf(0.30, 0.05, 0.40, 0.15, 0.10);
        // 0.40 < 0.6 <= 0.40 + 0.30
        assertArrayEquals(normalized(0.30, 0, 0.40, 0, 0), sampler.probs(logits, params(1.0, 0, 0.6)), EPS);
        // 0.70 < 0.75 <= 0.85
        assertArrayEquals(normalized(0.30, 0, 0.40, 0.15, 0), sampler.probs(logits, params(1.0, 0, 0.75)), EPS);
        // 0.3 <= 0.40: the top token alone
        assertArrayEquals(normalized(0, 0, 1, 0, 0), sampler.probs(logits, params(1.0, 0, 0.3)), EPS);
        // always at least one token
        assertArrayEquals(normalized(0, 0, 1, 0, 0), sampler.probs(logits, params(1.0, 0, 1e-9)), EPS);
        // 0.85 < 0.9 <= 0.95
        assertArrayEquals(normalized(0.30, 0, 0.40, 0.15, 0.10), sampler.probs(logits, params(1.0, 0, 0.9)), EPS);
    }

    @Test
    void topPBreaksProbabilityTiesByLowerIndex() {
        float[] logits = {0f, 1f, 1f, 1f};
        // three equal top tokens: p = 0.4 needs two of them (mass before the second < 0.4);
        // the lower indices win.
        float[] p = sampler.probs(logits, params(1.0, 0, 0.4));
        assertArrayEquals(new float[] {0, 0.5f, 0.5f, 0}, p, EPS);
    }

    // ---- order of the steps ------------------------------------------------------------------

    @Test
    void temperatureThenTopKThenTopPThenRenormalise() {
        // weights 1, 4, 16, 64 at T = 1; at T = 2 weights 1, 2, 4, 8.
        float[] logits = {0f, 2 * LN2, 4 * LN2, 6 * LN2};
        // T=2, top-k 3 -> 2/14, 4/14, 8/14 = 0.143, 0.286, 0.571; top-p 0.7 keeps {8, 4}.
        // (At T=1 top-p 0.7 would keep only the top token: 64/84 = 0.76.)
        assertArrayEquals(normalized(0, 0, 4, 8), sampler.probs(logits, params(2.0, 3, 0.7)), EPS);
        // top-p measures mass after top-k: 8/14 = 0.571 >= 0.55 keeps one token, whereas on the
        // distribution before top-k (8/15 = 0.533) it would keep two.
        assertArrayEquals(normalized(0, 0, 0, 1), sampler.probs(logits, params(2.0, 3, 0.55)), EPS);
        // top-k alone at T=2
        assertArrayEquals(normalized(0, 2, 4, 8), sampler.probs(logits, params(2.0, 3, 1.0)), EPS);
    }

    @Test
    void topPAgreesWithAFullSortOnALargeVocabulary() {
        RandomSource r = RandomSource.seeded(21);
        int vocab = 50_000;
        float[] logits = new float[vocab];
        for (int i = 0; i < vocab; i++) {
            // heavy head, long tail, some exact ties
            logits[i] = (float) Math.floor((r.nextDouble() * r.nextDouble()) * 400) / 20f;
        }
        for (double topP : new double[] {0.01, 0.3, 0.5, 0.9, 0.95, 0.999}) {
            for (double t : new double[] {0.3, 1.0, 2.5}) {
                float[] got = sampler.probs(logits, params(t, 0, topP));
                float[] want = naiveTopP(sampler.probs(logits, params(t, 0, 1.0)), topP);
                assertArrayEquals(want, got, 1e-7f, "topP=" + topP + " T=" + t);
            }
        }
    }

    /** Reference nucleus filter: full stable sort, descending probability, ties by index. */
    private static float[] naiveTopP(float[] probs, double topP) {
        Integer[] order = IntStream.range(0, probs.length).boxed().toArray(Integer[]::new);
        Arrays.sort(order, Comparator.comparingDouble((Integer i) -> -probs[i]));
        double total = 0;
        for (float p : probs) {
            total += p;
        }
        boolean[] keep = new boolean[probs.length];
        double cum = 0;
        for (int i : order) {
            if (probs[i] == 0f) {
                break;
            }
            keep[i] = true;
            cum += probs[i];
            if (cum >= topP * total) {
                break;
            }
        }
        float[] out = new float[probs.length];
        for (int i = 0; i < out.length; i++) {
            out[i] = keep[i] ? (float) (probs[i] / cum) : 0f;
        }
        return out;
    }

    // ---- sampling ----------------------------------------------------------------------------

    @Test
    void samplesFollowTheDistribution() {
        float[] logits = {0f, 2 * LN2, 4 * LN2, 6 * LN2, 1f, -1f};
        SamplingParams p = params(1.3, 5, 0.97);
        float[] probs = sampler.probs(logits, p);
        RandomSource rng = RandomSource.seeded(1);
        int n = 100_000;
        long[] counts = new long[logits.length];
        for (int i = 0; i < n; i++) {
            counts[sampler.sample(logits, p, rng)]++;
        }
        for (int j = 0; j < logits.length; j++) {
            if (probs[j] == 0f) {
                assertEquals(0, counts[j], "token " + j + " has probability 0");
            }
        }
        Stats.assertFits(counts, Stats.toDouble(probs), "samples of " + p);
    }

    @Test
    void sampleFromNeverReturnsZeroWeights() {
        float[] w = {0f, 0f, 3f, 0f, 1f, 0f};
        RandomSource rng = RandomSource.seeded(2);
        int[] seen = new int[w.length];
        for (int i = 0; i < 10_000; i++) {
            seen[Sampler.sampleFrom(w, rng)]++;
        }
        assertEquals(0, seen[0] + seen[1] + seen[3] + seen[5]);
        assertTrue(seen[2] > 7000 && seen[4] > 2000, Arrays.toString(seen));
    }

    @Test
    void seededSamplingIsDeterministicAndSeedsDiffer() {
        float[] logits = {0.1f, 0.3f, -0.2f, 0.05f, 0.2f, 0f}; // near-uniform
        SamplingParams p = params(1.0, 0, 0.95);
        int[] a = sampleMany(logits, p, RandomSource.seeded(1234), 500);
        int[] b = sampleMany(logits, p, RandomSource.seeded(1234), 500);
        int[] c = sampleMany(logits, p, RandomSource.seeded(1235), 500);
        assertArrayEquals(a, b);
        assertFalse(Arrays.equals(a, c));
    }

    private int[] sampleMany(float[] logits, SamplingParams p, RandomSource rng, int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = sampler.sample(logits, p, rng);
        }
        return out;
    }

    // ---- bad rows ----------------------------------------------------------------------------

    @Test
    void rejectsUnusableRows() {
        SamplingParams p = params(1.0, 0, 1.0);
        assertThrows(IllegalArgumentException.class, () -> sampler.probs(new float[0], p));
        assertThrows(IllegalArgumentException.class, () -> sampler.probs(new float[] {1f, Float.NaN}, p));
        assertThrows(IllegalArgumentException.class,
                () -> sampler.probs(new float[] {1f, Float.POSITIVE_INFINITY}, p));
        assertThrows(IllegalArgumentException.class,
                () -> sampler.probs(new float[] {Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY}, p));
        assertThrows(IllegalArgumentException.class,
                () -> sampler.sample(new float[] {1f, 2f}, p, null));
    }
}
