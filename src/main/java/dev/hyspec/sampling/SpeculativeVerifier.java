package dev.hyspec.sampling;

import java.util.Arrays;

/**
 * The rejection sampler: verifies one row of draft tokens against the target model's logits, so
 * that the tokens it emits are distributed exactly as if the target model had sampled them one by
 * one (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding";
 * Chen et al. 2023, "Accelerating Large Language Model Decoding with Speculative Sampling").
 *
 * <p>A verify row with {@code K} drafts {@code d_0 … d_{K−1}} feeds {@code T = K+1} inputs and
 * yields {@code K+1} target logits rows: row {@code i} is the target's distribution for the token
 * at draft position {@code i}, and row {@code K} the one for the token after the last draft.
 * Vocabulary, as in vLLM v1's {@code rejection_sampler.py}:
 *
 * <dl>
 *   <dt>accepted tokens</dt>
 *   <dd>draft tokens accepted on comparing the draft and target probabilities, in order, up to
 *       the first rejection. Greedy: {@code d_i} is accepted iff it equals the argmax of target
 *       row {@code i}. Sampled: {@code d_i} is accepted with probability
 *       {@code min(1, p_i(d_i) / q_i(d_i))}, where {@code p_i} is target row {@code i} after
 *       temperature, top-k and top-p ({@link Sampler#probs}) and {@code q_i} is the draft
 *       distribution {@code d_i} was drawn from.</dd>
 *   <dt>recovered tokens</dt>
 *   <dd>the token put in place of the first rejected draft, at that same position: sampled from
 *       the adjusted distribution {@code normalize(max(0, p_i − q_i))}, which is derived from
 *       both the draft and the target probabilities (greedy: the argmax of target row
 *       {@code i}).</dd>
 *   <dt>bonus tokens</dt>
 *   <dd>when every draft is accepted, one more token, sampled from the target probabilities
 *       alone (row {@code K}; greedy: its argmax).</dd>
 *   <dt>output tokens</dt>
 *   <dd>what the step emits: accepted tokens + recovered token + bonus token (exactly one of
 *       the last two), {@code a ∈ 1…K+1} tokens in all. A row with {@code K = 0} is an ordinary
 *       decode: its single output is a bonus token sampled from row 0.</dd>
 * </dl>
 *
 * <p>Draft probabilities are optional. Drafters that propose deterministically (n-gram / prompt
 * lookup) pass {@code null}: {@code q_i} is then one-hot on {@code d_i}, so {@code d_i} is
 * accepted with probability {@code p_i(d_i)} and a recovered token is drawn from {@code p_i} with
 * {@code d_i} removed (vLLM's {@code NO_DRAFT_PROBS}). A draft with {@code q_i(d_i) = 0} is always
 * rejected, as in vLLM.
 *
 * <p>Random draws come from the request's {@link RandomSource}, in a fixed order: one uniform in
 * {@code (0,1]} per examined draft, then one draw for the recovered or bonus token. Greedy
 * verification draws nothing. Same seed and same inputs therefore give the same output.
 *
 * <p>Stateless apart from its {@link Sampler}; thread-safe.
 */
public final class SpeculativeVerifier {
    private final Sampler sampler;

    public SpeculativeVerifier() {
        this(new Sampler());
    }

    public SpeculativeVerifier(Sampler sampler) {
        this.sampler = sampler;
    }

    /** Verification for a deterministic drafter (draft probabilities one-hot). */
    public Verification verify(float[][] targetLogits, int[] draftTokens, SamplingParams params,
            RandomSource rng) {
        return verify(targetLogits, draftTokens, null, params, rng);
    }

    /**
     * Verifies one row.
     *
     * @param targetLogits {@code [K+1][V]} target logits for draft positions {@code 0…K−1} and the
     *                     position after the last draft
     * @param draftTokens  {@code [K]} draft tokens
     * @param draftProbs   {@code [K][V]} the draft model's probabilities at each draft position,
     *                     or {@code null} for a deterministic drafter (one-hot draft
     *                     distribution); ignored for greedy requests
     * @param params       the request's sampling parameters
     * @param rng          the request's generator; may be null for greedy requests
     */
    public Verification verify(float[][] targetLogits, int[] draftTokens, float[][] draftProbs,
            SamplingParams params, RandomSource rng) {
        int k = draftTokens.length;
        checkShapes(targetLogits, draftTokens, draftProbs, params);
        int[] out = new int[k + 1];

        if (params.isGreedy()) {
            int[] argmax = new int[k + 1];
            for (int i = 0; i <= k; i++) {
                argmax[i] = sampler.sample(targetLogits[i], params, null);
            }
            return greedy(argmax, draftTokens);
        }

        if (rng == null) {
            throw new IllegalArgumentException("a sampled (non-greedy) request needs a RandomSource");
        }
        for (int i = 0; i < k; i++) {
            float[] p = sampler.probs(targetLogits[i], params);
            int d = draftTokens[i];
            double qd = draftProbs == null ? 1.0 : draftProbs[i][d];
            double u = rng.nextOpenClosedDouble();
            if (qd > 0.0 && p[d] >= u * qd) {
                out[i] = d; // accepted
                continue;
            }
            out[i] = Sampler.sampleFrom(residual(p, draftProbs == null ? null : draftProbs[i], d), rng);
            return result(k, i, out); // recovered
        }
        out[k] = Sampler.sampleFrom(sampler.probs(targetLogits[k], params), rng); // bonus
        return result(k, k, out);
    }

    /**
     * {@code max(0, p − q)} (unnormalised), with {@code q} one-hot on {@code draft} when
     * {@code q == null}. Falls back to {@code p} when nothing is left — a rejection then can only
     * have come from {@code q(draft) = 0} or from rounding, where {@code p} is the right law.
     */
    static float[] residual(float[] p, float[] q, int draft) {
        float[] r = new float[p.length];
        boolean any = false;
        if (q == null) {
            System.arraycopy(p, 0, r, 0, p.length);
            r[draft] = 0f;
            for (float v : r) {
                if (v > 0f) {
                    any = true;
                    break;
                }
            }
        } else {
            for (int j = 0; j < p.length; j++) {
                float v = p[j] - q[j];
                if (v > 0f) {
                    r[j] = v;
                    any = true;
                }
            }
        }
        return any ? r : p;
    }

    /**
     * Greedy verification from the target rows' argmax alone ({@code argmax[i]} of row {@code i},
     * {@code K+1} of them): drafts are accepted while they equal it, then the argmax of the first
     * mismatching row (recovered) or of row {@code K} (bonus). What {@link #verify} does for a greedy
     * request, for callers that took the argmax on the device.
     */
    public static Verification greedy(int[] argmax, int[] draftTokens) {
        int k = draftTokens.length;
        if (argmax.length != k + 1) {
            throw new IllegalArgumentException("greedy verification of " + k + " drafts needs " + (k + 1)
                    + " argmax rows, got " + argmax.length);
        }
        int[] out = new int[k + 1];
        for (int i = 0; i < k; i++) {
            if (draftTokens[i] != argmax[i]) {
                out[i] = argmax[i]; // recovered
                return result(k, i, out);
            }
            out[i] = draftTokens[i]; // accepted
        }
        out[k] = argmax[k]; // bonus
        return result(k, k, out);
    }

    private static Verification result(int k, int accepted, int[] out) {
        int[] tokens = accepted == k ? out : Arrays.copyOf(out, accepted + 1);
        return new Verification(k, accepted, tokens);
    }

    private static void checkShapes(float[][] targetLogits, int[] draftTokens, float[][] draftProbs,
            SamplingParams params) {
        int k = draftTokens.length;
        if (targetLogits.length != k + 1) {
            throw new IllegalArgumentException("targetLogits must have K+1 = " + (k + 1)
                    + " rows for K = " + k + " drafts, got " + targetLogits.length);
        }
        int vocab = targetLogits[0].length;
        for (int i = 1; i <= k; i++) {
            if (targetLogits[i].length != vocab) {
                throw new IllegalArgumentException("targetLogits row " + i + " has "
                        + targetLogits[i].length + " entries, row 0 has " + vocab);
            }
        }
        for (int i = 0; i < k; i++) {
            if (draftTokens[i] < 0 || draftTokens[i] >= vocab) {
                throw new IllegalArgumentException("draftTokens[" + i + "] = " + draftTokens[i]
                        + " is outside the vocabulary [0, " + vocab + ")");
            }
        }
        if (draftProbs != null && !params.isGreedy()) {
            if (draftProbs.length != k) {
                throw new IllegalArgumentException("draftProbs must have K = " + k
                        + " rows, got " + draftProbs.length);
            }
            for (int i = 0; i < k; i++) {
                if (draftProbs[i].length != vocab) {
                    throw new IllegalArgumentException("draftProbs row " + i + " has "
                            + draftProbs[i].length + " entries, the vocabulary has " + vocab);
                }
            }
        }
    }
}
