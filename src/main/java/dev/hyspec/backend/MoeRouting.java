package dev.hyspec.backend;

import java.util.Arrays;

/**
 * How a sparse MoE router turns logits into {@code K} experts per token and their weights. The
 * host routing here ({@link #route}) is the reference: {@link Backend#moeRoute}'s default and the
 * prefill path of {@code SparseMoe} both call it, and a GPU kernel is tested against it.
 *
 * <ul>
 *   <li>softmax (Qwen3-Next {@code Qwen3NextSparseMoeBlock}): {@code p = softmax(logits)}, the top
 *       {@code K} of {@code p}, weights {@code p_e}, renormalised to sum 1 when {@code normTopkProb}.
 *   <li>sigmoid (Nemotron-H {@code NemotronHMoE}): {@code s = σ(logits)}; experts chosen on
 *       {@code s + scoreBias} within the best {@code topkGroup} of {@code nGroup} equal groups (a group
 *       scores the sum of its two best); weights {@code s_e}, divided by {@code Σ s + 1e−20} when
 *       {@code normTopkProb}, times {@code routedScalingFactor}.
 * </ul>
 * Top-k picks the largest first; ties go to the lowest index.
 *
 * @param scoreBias the sigmoid router's {@code e_score_correction_bias [E]} on the backend, or null
 *                  (no bias; always null for softmax)
 */
public record MoeRouting(boolean sigmoid, int topK, boolean normTopkProb, int nGroup, int topkGroup,
                         float routedScalingFactor, Tensor scoreBias) {

    public MoeRouting {
        if (topK < 1) {
            throw new IllegalArgumentException("a router picks at least one expert, got topK " + topK);
        }
        if (sigmoid && (nGroup < 1 || topkGroup < 1 || topkGroup > nGroup)) {
            throw new IllegalArgumentException("group-limited routing needs 1 ≤ topkGroup ≤ nGroup, got "
                    + topkGroup + " of " + nGroup);
        }
    }

    /** Softmax routing (Qwen3-Next). */
    public static MoeRouting softmax(int topK, boolean normTopkProb) {
        return new MoeRouting(false, topK, normTopkProb, 1, 1, 1f, null);
    }

    /**
     * Routes {@code T} tokens on the host: {@code logits [T, E]} row-major; {@code bias [E]} is the
     * host copy of {@link #scoreBias} (null: none). Writes {@code ids [T, K]} and {@code weights [T, K]},
     * each token's experts best first.
     */
    public void route(float[] logits, int experts, float[] bias, int[] ids, float[] weights) {
        int tokens = logits.length / experts;
        if (logits.length != tokens * experts || ids.length != tokens * topK || weights.length != ids.length) {
            throw new IllegalArgumentException("route: " + logits.length + " logits of " + experts + " experts, "
                    + ids.length + " ids and " + weights.length + " weights for top-" + topK);
        }
        if (topK > experts || (sigmoid && experts % nGroup != 0)) {
            throw new IllegalArgumentException("route: top-" + topK + " of " + experts + " experts in " + nGroup
                    + " groups");
        }
        int[] chosen = new int[topK];
        float[] wts = new float[topK];
        for (int t = 0; t < tokens; t++) {
            float[] row = Arrays.copyOfRange(logits, t * experts, (t + 1) * experts);
            if (sigmoid) {
                routeSigmoid(row, bias, chosen, wts);
            } else {
                routeSoftmax(row, chosen, wts);
            }
            System.arraycopy(chosen, 0, ids, t * topK, topK);
            System.arraycopy(wts, 0, weights, t * topK, topK);
        }
    }

    private void routeSoftmax(float[] logits, int[] chosen, float[] wts) {
        float max = Float.NEGATIVE_INFINITY;
        for (float l : logits) {
            max = Math.max(max, l);
        }
        float sum = 0f;
        float[] p = new float[logits.length];
        for (int e = 0; e < p.length; e++) {
            p[e] = (float) Math.exp(logits[e] - max);
            sum += p[e];
        }
        for (int e = 0; e < p.length; e++) {
            p[e] /= sum;
        }
        topK(p, chosen);
        float total = 0f;
        for (int i = 0; i < chosen.length; i++) {
            wts[i] = p[chosen[i]];
            total += wts[i];
        }
        if (normTopkProb) {
            for (int i = 0; i < wts.length; i++) {
                wts[i] /= total;
            }
        }
    }

    private void routeSigmoid(float[] logits, float[] bias, int[] chosen, float[] wts) {
        int n = logits.length;
        float[] s = new float[n];
        float[] choice = new float[n];
        for (int e = 0; e < n; e++) {
            s[e] = 1f / (1f + (float) Math.exp(-logits[e]));
            choice[e] = s[e] + (bias == null ? 0f : bias[e]);
        }
        int perGroup = n / nGroup;
        if (nGroup > 1) {
            float[] groupScore = new float[nGroup];
            for (int g = 0; g < nGroup; g++) {
                float[] members = Arrays.copyOfRange(choice, g * perGroup, (g + 1) * perGroup);
                int[] best = new int[Math.min(2, perGroup)];
                topK(members, best);
                for (int b : best) {
                    groupScore[g] += members[b];
                }
            }
            int[] keep = new int[topkGroup];
            topK(groupScore, keep);
            boolean[] kept = new boolean[nGroup];
            for (int g : keep) {
                kept[g] = true;
            }
            for (int e = 0; e < n; e++) {
                if (!kept[e / perGroup]) {
                    choice[e] = Float.NEGATIVE_INFINITY;
                }
            }
        }
        topK(choice, chosen);
        float total = 0f;
        for (int i = 0; i < chosen.length; i++) {
            wts[i] = s[chosen[i]];
            total += wts[i];
        }
        for (int i = 0; i < wts.length; i++) {
            if (normTopkProb) {
                wts[i] /= total + 1e-20f;
            }
            wts[i] *= routedScalingFactor;
        }
    }

    /** Indices of the {@code out.length} largest values, largest first (ties: lower index first). */
    private static void topK(float[] values, int[] out) {
        boolean[] taken = new boolean[values.length];
        for (int i = 0; i < out.length; i++) {
            int best = -1;
            for (int e = 0; e < values.length; e++) {
                if (!taken[e] && (best < 0 || values[e] > values[best])) {
                    best = e;
                }
            }
            taken[best] = true;
            out[i] = best;
        }
    }
}
