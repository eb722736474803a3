package dev.hyspec.sampling;

import java.util.Arrays;

/**
 * Turns one row of logits into the distribution a request samples from, and samples it. The
 * steps follow vLLM v1's {@code Sampler.sample} / {@code apply_top_k_top_p}:
 *
 * <ol>
 *   <li>greedy ({@link SamplingParams#isGreedy()}): one-hot at the argmax, ties going to the
 *       lowest index; top-k and top-p do not matter;</li>
 *   <li>temperature: {@code logits / temperature};</li>
 *   <li>top-k: keep every token whose logit is at least the {@code k}-th largest (ties at the
 *       threshold are kept, as in vLLM), mask the rest to {@code -inf};</li>
 *   <li>softmax over what is left;</li>
 *   <li>top-p (nucleus): order tokens by probability (descending, ties by lower index) and keep
 *       the smallest prefix whose cumulative probability is {@code >= topP} — a token is kept iff
 *       the mass strictly before it is {@code < topP}, so at least one token is always kept;</li>
 *   <li>renormalise.</li>
 * </ol>
 *
 * <p>Logits must not hold NaN or {@code +inf} and must hold at least one finite value;
 * {@code -inf} entries (masked tokens) are allowed. Sums are taken in double.
 *
 * <p>Stateless and thread-safe; all scratch space is allocated per call.
 */
public final class Sampler {

    /** The argmax of {@code logits}, ties going to the lowest index. */
    public static int argmax(float[] logits) {
        if (logits.length == 0) {
            throw new IllegalArgumentException("empty logits row");
        }
        int best = 0;
        float bestValue = logits[0];
        for (int i = 1; i < logits.length; i++) {
            if (logits[i] > bestValue) {
                bestValue = logits[i];
                best = i;
            }
        }
        return best;
    }

    /**
     * The target distribution of one logits row under {@code params}.
     *
     * @return a new array of {@code logits.length} probabilities summing to 1 (up to rounding)
     */
    public float[] probs(float[] logits, SamplingParams params) {
        float max = checkedMax(logits);
        int vocab = logits.length;
        float[] probs = new float[vocab];
        if (params.isGreedy()) {
            probs[argmax(logits)] = 1f;
            return probs;
        }

        // Top-k on the raw logits: dividing by a positive temperature keeps their order.
        float threshold = params.topKActive(vocab)
                ? kthLargest(logits, params.topK())
                : Float.NEGATIVE_INFINITY;

        // Temperature + softmax over the tokens top-k kept.
        double invT = 1.0 / params.temperature();
        double sum = 0.0;
        for (int i = 0; i < vocab; i++) {
            float l = logits[i];
            if (l >= threshold && l != Float.NEGATIVE_INFINITY) {
                float v = (float) Math.exp((l - (double) max) * invT);
                probs[i] = v;
                sum += v;
            }
        }
        // The max itself contributes exp(0) = 1, so sum >= 1.
        double inv = 1.0 / sum;
        for (int i = 0; i < vocab; i++) {
            probs[i] = (float) (probs[i] * inv);
        }

        if (params.topPActive()) {
            applyTopP(probs, params.topP());
        }
        return probs;
    }

    /**
     * Samples one token from {@code logits} under {@code params}.
     *
     * @param rng the request's generator; may be null for greedy requests, which draw nothing
     */
    public int sample(float[] logits, SamplingParams params, RandomSource rng) {
        if (params.isGreedy()) {
            checkedMax(logits);
            return argmax(logits);
        }
        if (rng == null) {
            throw new IllegalArgumentException("a sampled (non-greedy) request needs a RandomSource");
        }
        return sampleFrom(probs(logits, params), rng);
    }

    /**
     * Draws one index from non-negative weights (not necessarily normalised) by inverse CDF with
     * one uniform draw. Zero-weight indices are never returned.
     *
     * @throws IllegalArgumentException if every weight is 0
     */
    public static int sampleFrom(float[] weights, RandomSource rng) {
        double total = 0.0;
        for (float w : weights) {
            total += w;
        }
        if (!(total > 0.0) || Double.isInfinite(total)) {
            throw new IllegalArgumentException("weights must have a positive finite sum, got " + total);
        }
        double target = rng.nextDouble() * total;
        double cum = 0.0;
        int lastPositive = -1;
        for (int i = 0; i < weights.length; i++) {
            float w = weights[i];
            if (w > 0f) {
                cum += w;
                lastPositive = i;
                if (target < cum) {
                    return i;
                }
            }
        }
        // Only reached through rounding (target within an ulp of total).
        return lastPositive;
    }

    /**
     * Nucleus filter in place: zero every token outside the smallest highest-probability prefix
     * whose mass reaches {@code topP}, then renormalise.
     */
    static void applyTopP(float[] probs, double topP) {
        int vocab = probs.length;
        double total = 0.0;
        // Bucket by binary exponent: one pass finds the lowest exponent the nucleus can reach,
        // so only tokens at or above it (usually a handful) need sorting.
        double[] bucketMass = new double[130];
        for (float p : probs) {
            if (p > 0f) {
                total += p;
                bucketMass[bucket(p)] += p;
            }
        }
        double target = topP * total;
        int cutoff = 0;
        double cum = 0.0;
        for (int b = bucketMass.length - 1; b >= 0; b--) {
            cum += bucketMass[b];
            if (cum >= target) {
                // One bucket of margin so rounding in the sums below cannot run out of candidates.
                cutoff = Math.max(0, b - 1);
                break;
            }
        }

        int n = 0;
        for (float p : probs) {
            if (p > 0f && bucket(p) >= cutoff) {
                n++;
            }
        }
        // Key: probability bits (monotone for non-negative floats) high, complemented index low,
        // so ascending order is (probability ascending, index descending); read it backwards.
        long[] keys = new long[n];
        n = 0;
        for (int i = 0; i < vocab; i++) {
            float p = probs[i];
            if (p > 0f && bucket(p) >= cutoff) {
                keys[n++] = ((long) Float.floatToRawIntBits(p) << 32) | (~i & 0xffffffffL);
            }
        }
        Arrays.sort(keys);

        boolean[] keep = new boolean[vocab];
        double kept = 0.0;
        for (int j = n - 1; j >= 0; j--) {
            int i = ~(int) keys[j];
            keep[i] = true;
            kept += probs[i];
            if (kept >= target) {
                break;
            }
        }
        double inv = 1.0 / kept;
        for (int i = 0; i < vocab; i++) {
            probs[i] = keep[i] ? (float) (probs[i] * inv) : 0f;
        }
    }

    private static int bucket(float p) {
        // p in (0, 1]: exponent in [-127, 0] (subnormals report -127).
        return Math.getExponent(p) + 127;
    }

    /** The {@code k}-th largest value of {@code values} ({@code 1 <= k < values.length}). */
    static float kthLargest(float[] values, int k) {
        // Min-heap of the k largest seen so far; its root is the k-th largest.
        float[] heap = new float[k];
        int size = 0;
        for (float v : values) {
            if (size < k) {
                int c = size++;
                heap[c] = v;
                while (c > 0) {
                    int parent = (c - 1) >>> 1;
                    if (heap[parent] <= heap[c]) {
                        break;
                    }
                    float t = heap[parent];
                    heap[parent] = heap[c];
                    heap[c] = t;
                    c = parent;
                }
            } else if (v > heap[0]) {
                heap[0] = v;
                int c = 0;
                while (true) {
                    int l = 2 * c + 1;
                    if (l >= k) {
                        break;
                    }
                    int m = (l + 1 < k && heap[l + 1] < heap[l]) ? l + 1 : l;
                    if (heap[c] <= heap[m]) {
                        break;
                    }
                    float t = heap[m];
                    heap[m] = heap[c];
                    heap[c] = t;
                    c = m;
                }
            }
        }
        return heap[0];
    }

    /** The largest logit, after checking the row is usable. */
    private static float checkedMax(float[] logits) {
        if (logits.length == 0) {
            throw new IllegalArgumentException("empty logits row");
        }
        float max = Float.NEGATIVE_INFINITY;
        for (float l : logits) {
            if (Float.isNaN(l) || l == Float.POSITIVE_INFINITY) {
                throw new IllegalArgumentException("logits must not contain NaN or +inf, got " + l);
            }
            if (l > max) {
                max = l;
            }
        }
        if (max == Float.NEGATIVE_INFINITY) {
            throw new IllegalArgumentException("every logit is -inf");
        }
        return max;
    }
}
