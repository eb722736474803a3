package dev.hyspec.sampling;

/**
 * The log-probability of one generated token and the {@code n} most likely alternatives at its
 * position, from the model's raw logits ({@code log_softmax(logits)}: before temperature, top-k and
 * top-p, as vLLM's default {@code raw_logprobs} mode). With speculative decoding the figures come
 * from the target model's logits at that position, so they do not depend on the drafts.
 *
 * @param token      the generated token
 * @param logprob    {@code log p(token)}
 * @param topIds     the {@code n} most likely tokens, most likely first (may include {@code token})
 * @param topLogprobs their log-probabilities
 */
public record TokenLogprob(int token, float logprob, int[] topIds, float[] topLogprobs) {

    /** Computes the logprob of {@code token} and the {@code topN} best alternatives from one row of logits. */
    public static TokenLogprob of(float[] logits, int token, int topN) {
        float max = Float.NEGATIVE_INFINITY;
        for (float v : logits) {
            max = Math.max(max, v);
        }
        double sum = 0;
        for (float v : logits) {
            sum += Math.exp(v - max);
        }
        float logZ = (float) (max + Math.log(sum));
        int n = Math.min(Math.max(topN, 0), logits.length);
        int[] ids = new int[n];
        float[] lps = new float[n];
        // partial selection: n is small (at most 20)
        boolean[] taken = new boolean[n > 0 ? logits.length : 0];
        for (int k = 0; k < n; k++) {
            int best = -1;
            for (int i = 0; i < logits.length; i++) {
                if (!taken[i] && (best < 0 || logits[i] > logits[best])) {
                    best = i;
                }
            }
            taken[best] = true;
            ids[k] = best;
            lps[k] = logits[best] - logZ;
        }
        return new TokenLogprob(token, logits[token] - logZ, ids, lps);
    }
}
