package dev.hyspec.sampling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Sampled verification is lossless: the tokens it emits are distributed exactly as the target's
 * (processed) distribution, whatever the drafts. Target rows here do not depend on history, so
 * the law of the first two output tokens must be {@code p_0 ⊗ p_1}.
 *
 * <p>Each check draws {@value #TRIALS} rows from a fixed seed (so the test is reproducible) and
 * applies Pearson's chi-square at significance 1e-6. {@link #theCheckHasPower()} shows the same
 * check rejects a subtly wrong verifier.
 */
class SpeculativeLosslessnessTest {
    private static final int TRIALS = 200_000;
    private static final int V = 6;

    private final Sampler sampler = new Sampler();
    private final SpeculativeVerifier verifier = new SpeculativeVerifier(sampler);

    /** Target params: plain softmax at temperature 1. */
    private static final SamplingParams PLAIN = SamplingParams.random(1.0, null, 64);
    /**
     * Target params with every filter on: T = 0.8, top-k 4 drops tokens 0 and 1, then top-p 0.8
     * drops token 2 (mass of tokens 5, 4, 3 after top-k at T = 0.8: 0.35, 0.61, 0.84).
     */
    private static final SamplingParams FILTERED =
            new SamplingParams(0.8, 0.8, 4, null, 64, List.of(), false);

    private static float[] logitsOf(double... weights) {
        float[] l = new float[weights.length];
        for (int i = 0; i < l.length; i++) {
            l[i] = (float) Math.log(weights[i]);
        }
        return l;
    }

    // Three target rows (positions 0, 1, 2) and draft distributions q != p.
    private static final float[] T0 = logitsOf(0.05, 0.10, 0.15, 0.20, 0.22, 0.28);
    private static final float[] T1 = logitsOf(0.30, 0.25, 0.05, 0.20, 0.12, 0.08);
    private static final float[] T2 = logitsOf(0.10, 0.10, 0.30, 0.10, 0.25, 0.15);
    private static final float[] Q0 = {0.30f, 0.25f, 0.05f, 0.05f, 0.15f, 0.20f};
    private static final float[] Q1 = {0.05f, 0.10f, 0.40f, 0.15f, 0.20f, 0.10f};

    private double[] p(float[] logits, SamplingParams params) {
        return Stats.toDouble(sampler.probs(logits, params));
    }

    // ---- first output token, one draft -------------------------------------------------------

    @Test
    void oneHotDraftFirstTokenFollowsTarget() {
        RandomSource rng = RandomSource.seeded(101);
        long[] counts = new long[V];
        long accepted = 0;
        for (int t = 0; t < TRIALS; t++) {
            Verification v = verifier.verify(new float[][] {T0, T1}, new int[] {4}, PLAIN, rng);
            counts[v.outputToken(0)]++;
            accepted += v.numAcceptedTokens();
        }
        double[] p0 = p(T0, PLAIN);
        Stats.assertFits(counts, p0, "first token, one-hot draft 4");
        // acceptance probability of a one-hot draft d is p(d)
        assertEquals(p0[4], (double) accepted / TRIALS, 5 * Math.sqrt(p0[4] * (1 - p0[4]) / TRIALS));
    }

    @Test
    void oneHotDraftFilteredOutIsNeverAcceptedAndFirstTokenFollowsFilteredTarget() {
        double[] p0 = p(T0, FILTERED);
        assertTrue(p0[0] == 0 && p0[1] == 0 && p0[2] == 0 && p0[3] > 0 && p0[4] > 0 && p0[5] > 0,
                "sanity: top-k removes tokens 0, 1 and top-p token 2");
        RandomSource rng = RandomSource.seeded(102);
        for (int draft = 0; draft < V; draft++) {
            long[] counts = new long[V];
            long accepted = 0;
            for (int t = 0; t < TRIALS / 4; t++) {
                Verification v = verifier.verify(new float[][] {T0, T1}, new int[] {draft}, FILTERED, rng);
                counts[v.outputToken(0)]++;
                accepted += v.numAcceptedTokens();
            }
            Stats.assertFits(counts, p0, "first token, one-hot draft " + draft + " under top-k/top-p");
            if (p0[draft] == 0) {
                assertEquals(0, accepted, "a filtered-out draft must never be accepted");
            }
        }
    }

    @Test
    void sampledDraftFirstTokenFollowsTarget() {
        for (SamplingParams params : List.of(PLAIN, FILTERED)) {
            RandomSource rng = RandomSource.seeded(103);
            RandomSource draftRng = RandomSource.seeded(203);
            long[] counts = new long[V];
            long accepted = 0;
            for (int t = 0; t < TRIALS; t++) {
                int d = Sampler.sampleFrom(Q0, draftRng);
                Verification v = verifier.verify(new float[][] {T0, T1}, new int[] {d},
                        new float[][] {Q0}, params, rng);
                counts[v.outputToken(0)]++;
                accepted += v.numAcceptedTokens();
            }
            double[] p0 = p(T0, params);
            Stats.assertFits(counts, p0, "first token, draft ~ q, " + params);
            // acceptance rate = sum_x min(p(x), q(x)) = 1 - TV(p, q)
            double alpha = 0;
            for (int x = 0; x < V; x++) {
                alpha += Math.min(p0[x], Q0[x]);
            }
            assertEquals(alpha, (double) accepted / TRIALS, 5 * Math.sqrt(alpha * (1 - alpha) / TRIALS));
        }
    }

    // ---- first two output tokens -------------------------------------------------------------

    /**
     * One draft (drawn from {@code Q0}): the second token is the bonus when the draft is accepted,
     * else the next step's plain decode of row 1. Joint must be {@code p0 ⊗ p1}.
     */
    @Test
    void oneDraftJointOfFirstTwoTokensIncludingBonus() {
        RandomSource rng = RandomSource.seeded(104);
        RandomSource draftRng = RandomSource.seeded(204);
        long[] joint = new long[V * V];
        for (int t = 0; t < TRIALS; t++) {
            int d = Sampler.sampleFrom(Q0, draftRng);
            Verification v = verifier.verify(new float[][] {T0, T1}, new int[] {d},
                    new float[][] {Q0}, PLAIN, rng);
            int first = v.outputToken(0);
            int second = v.numOutputTokens() > 1
                    ? v.outputToken(1)
                    : verifier.verify(new float[][] {T1}, new int[0], PLAIN, rng).outputToken(0);
            joint[first * V + second]++;
        }
        Stats.assertFits(joint, Stats.outer(p(T0, PLAIN), p(T1, PLAIN)), "joint, K=1 with bonus");
    }

    /**
     * Two drafts drawn from {@code Q0}, {@code Q1} (or fixed, for an n-gram drafter): the first two
     * output tokens. After a rejection at position 0 the next step drafts again at position 1.
     * Also checks the second token alone given that the first draft was accepted.
     */
    @Test
    void twoDraftsJointOfFirstTwoTokens() {
        for (boolean oneHot : new boolean[] {false, true}) {
            RandomSource rng = RandomSource.seeded(oneHot ? 105 : 106);
            RandomSource draftRng = RandomSource.seeded(205);
            long[] joint = new long[V * V];
            long[] secondGivenAccepted = new long[V];
            for (int t = 0; t < TRIALS; t++) {
                int d0 = oneHot ? 5 : Sampler.sampleFrom(Q0, draftRng);
                int d1 = oneHot ? 2 : Sampler.sampleFrom(Q1, draftRng);
                float[][] q = oneHot ? null : new float[][] {Q0, Q1};
                Verification v = verifier.verify(new float[][] {T0, T1, T2}, new int[] {d0, d1}, q,
                        PLAIN, rng);
                int first = v.outputToken(0);
                int second;
                if (v.numOutputTokens() > 1) {
                    second = v.outputToken(1);
                    secondGivenAccepted[second]++;
                } else {
                    int e1 = oneHot ? 2 : Sampler.sampleFrom(Q1, draftRng);
                    float[][] q1 = oneHot ? null : new float[][] {Q1};
                    second = verifier.verify(new float[][] {T1, T2}, new int[] {e1}, q1, PLAIN, rng)
                            .outputToken(0);
                }
                joint[first * V + second]++;
            }
            String what = oneHot ? "one-hot drafts" : "drafts ~ q";
            Stats.assertFits(joint, Stats.outer(p(T0, PLAIN), p(T1, PLAIN)), "joint, K=2, " + what);
            Stats.assertFits(secondGivenAccepted, p(T1, PLAIN),
                    "second token given first draft accepted, " + what);
        }
    }

    // ---- the check can fail ------------------------------------------------------------------

    /**
     * A verifier that resamples a rejected position from {@code p} instead of
     * {@code normalize(max(0, p − q))} is biased towards the drafter; the same chi-square check
     * must catch it (and does so by a wide margin).
     */
    @Test
    void theCheckHasPower() {
        RandomSource rng = RandomSource.seeded(107);
        RandomSource draftRng = RandomSource.seeded(207);
        double[] p0 = p(T0, PLAIN);
        float[] p0f = sampler.probs(T0, PLAIN);
        long[] counts = new long[V];
        for (int t = 0; t < TRIALS; t++) {
            int d = Sampler.sampleFrom(Q0, draftRng);
            double u = rng.nextOpenClosedDouble();
            int first = p0f[d] >= u * Q0[d] ? d : Sampler.sampleFrom(p0f, rng); // wrong on reject
            counts[first]++;
        }
        double stat = Stats.chiSquare(counts, p0);
        assertTrue(stat > 10 * Stats.critical(p0), "naive verifier went unnoticed: chi-square " + stat);
    }
}
