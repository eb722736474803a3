package dev.hyspec.sampling;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Deterministic behaviour of the verifier: greedy rows, certain accept/reject, shapes, seeds. */
class SpeculativeVerifierTest {
    private static final float NEG_INF = Float.NEGATIVE_INFINITY;

    private final SpeculativeVerifier verifier = new SpeculativeVerifier();
    private final SamplingParams greedy = SamplingParams.greedy(64);
    private final SamplingParams sampled = SamplingParams.random(1.0, 7L, 64);

    /** A logits row of size {@code vocab} whose argmax is {@code top} (runner-up next to it). */
    private static float[] peakedAt(int top, int vocab) {
        float[] row = new float[vocab];
        for (int i = 0; i < vocab; i++) {
            row[i] = -0.1f * i;
        }
        row[top] = 5f;
        row[(top + 1) % vocab] = 4.5f;
        return row;
    }

    /** A row that puts all probability on {@code token}, whatever the temperature. */
    private static float[] certain(int token, int vocab) {
        float[] row = new float[vocab];
        java.util.Arrays.fill(row, NEG_INF);
        row[token] = 0f;
        return row;
    }

    private static float[][] rows(int vocab, int... argmaxes) {
        float[][] r = new float[argmaxes.length][];
        for (int i = 0; i < argmaxes.length; i++) {
            r[i] = peakedAt(argmaxes[i], vocab);
        }
        return r;
    }

    // ---- greedy ------------------------------------------------------------------------------

    @Test
    void greedyAllAcceptedPlusBonus() {
        Verification v = verifier.verify(rows(8, 2, 0, 7, 1), new int[] {2, 0, 7}, greedy, null);
        assertEquals(3, v.numDraftTokens());
        assertEquals(3, v.numAcceptedTokens());
        assertArrayEquals(new int[] {2, 0, 7, 1}, v.outputTokens());
        assertTrue(v.allAccepted());
        assertEquals(4, v.numOutputTokens());
        assertEquals(1, v.lastToken());
    }

    @Test
    void greedyFirstDraftRejectedGivesTheArgmaxAsRecovered() {
        Verification v = verifier.verify(rows(8, 2, 0, 7, 1), new int[] {3, 0, 7}, greedy, null);
        assertEquals(0, v.numAcceptedTokens());
        assertArrayEquals(new int[] {2}, v.outputTokens());
        assertFalse(v.allAccepted());
        assertEquals(3, v.numRejectedTokens());
    }

    @Test
    void greedyRejectionInTheMiddleStopsThere() {
        Verification v = verifier.verify(rows(8, 2, 0, 7, 1), new int[] {2, 0, 6}, greedy, null);
        assertEquals(2, v.numAcceptedTokens());
        assertArrayEquals(new int[] {2, 0, 7}, v.outputTokens());
        // Later drafts are not examined: a rejection at position 1 hides position 2.
        Verification w = verifier.verify(rows(8, 2, 0, 7, 1), new int[] {2, 5, 7}, greedy, null);
        assertArrayEquals(new int[] {2, 0}, w.outputTokens());
    }

    @Test
    void zeroDraftsIsAPlainDecode() {
        Verification v = verifier.verify(rows(8, 5), new int[0], greedy, null);
        assertEquals(0, v.numDraftTokens());
        assertEquals(0, v.numAcceptedTokens());
        assertArrayEquals(new int[] {5}, v.outputTokens());
        assertTrue(v.allAccepted(), "the single output of a decode row is a bonus token");
    }

    @Test
    void greedyRecoveredTokenTiesGoToTheLowestIndex() {
        float[] tied = {0f, 3f, 1f, 3f};
        Verification v = verifier.verify(new float[][] {tied, tied}, new int[] {3}, greedy, null);
        assertArrayEquals(new int[] {1}, v.outputTokens());
    }

    @Test
    void greedyIgnoresDraftProbabilitiesAndTopKTopP() {
        float[][] target = rows(8, 2, 0, 7, 1);
        float[][] q = new float[3][8]; // nonsense draft probabilities: all zero
        SamplingParams g = greedy.withTopKTopP(1, 0.1);
        assertEquals(verifier.verify(target, new int[] {2, 0, 7}, greedy, null),
                verifier.verify(target, new int[] {2, 0, 7}, q, g, null));
    }

    @Test
    void sampledZeroDraftsEqualsPlainSampling() {
        Sampler sampler = new Sampler();
        float[] row = {0.3f, -1f, 2f, 0.5f, 1.5f};
        for (long seed = 0; seed < 50; seed++) {
            int plain = sampler.sample(row, sampled, RandomSource.seeded(seed));
            Verification v = verifier.verify(new float[][] {row}, new int[0], sampled,
                    RandomSource.seeded(seed));
            assertArrayEquals(new int[] {plain}, v.outputTokens(), "seed " + seed);
        }
    }

    // ---- sampled, certain outcomes -----------------------------------------------------------

    @Test
    void sampledDraftWithTargetProbabilityOneIsAlwaysAccepted() {
        float[][] target = {certain(3, 6), certain(1, 6), certain(4, 6)};
        RandomSource rng = RandomSource.seeded(1);
        for (int t = 0; t < 1000; t++) {
            Verification v = verifier.verify(target, new int[] {3, 1}, sampled, rng);
            assertArrayEquals(new int[] {3, 1, 4}, v.outputTokens());
        }
    }

    @Test
    void sampledDraftWithTargetProbabilityZeroIsAlwaysRejected() {
        float[][] target = {certain(3, 6), certain(1, 6), certain(4, 6)};
        RandomSource rng = RandomSource.seeded(2);
        for (int t = 0; t < 1000; t++) {
            Verification v = verifier.verify(target, new int[] {3, 2}, sampled, rng);
            assertArrayEquals(new int[] {3, 1}, v.outputTokens());
            assertEquals(1, v.numAcceptedTokens());
        }
    }

    @Test
    void draftTheDrafterGaveProbabilityZeroIsRejected() {
        // Uniform target; the draft claims token 2 had q = 0, so it cannot be accepted (vLLM).
        float[][] target = {new float[4], new float[4]};
        float[][] q = {{0.5f, 0.5f, 0f, 0f}};
        RandomSource rng = RandomSource.seeded(3);
        for (int t = 0; t < 1000; t++) {
            Verification v = verifier.verify(target, new int[] {2}, q, sampled, rng);
            assertEquals(0, v.numAcceptedTokens());
            // residual max(0, p - q) = (0, 0, .25, .25)
            int tok = v.outputToken(0);
            assertTrue(tok == 2 || tok == 3, "recovered " + tok);
        }
    }

    @Test
    void residualIsTheClippedDifference() {
        float[] p = {0.5f, 0.3f, 0.2f};
        assertArrayEquals(new float[] {0.3f, 0f, 0f},
                SpeculativeVerifier.residual(p, new float[] {0.2f, 0.5f, 0.3f}, 1), 1e-7f);
        // one-hot draft: p without the drafted token
        assertArrayEquals(new float[] {0.5f, 0f, 0.2f}, SpeculativeVerifier.residual(p, null, 1), 0f);
        // nothing left: fall back to p
        assertArrayEquals(p, SpeculativeVerifier.residual(p, p.clone(), 0), 0f);
    }

    // ---- seeds -------------------------------------------------------------------------------

    @Test
    void sameSeedSameVerificationsDifferentSeedsDiffer() {
        float[][] target = {
            {0.2f, 0.1f, 0f, 0.3f, -0.1f}, {0f, 0.4f, 0.1f, 0f, 0.2f}, {0.3f, 0f, 0f, 0.1f, 0.2f}};
        float[][] q = {{0.2f, 0.2f, 0.2f, 0.2f, 0.2f}, {0.1f, 0.3f, 0.3f, 0.2f, 0.1f}};
        int[] drafts = {3, 1};
        List<Verification> a = run(target, drafts, q, RandomSource.seeded(99));
        List<Verification> b = run(target, drafts, q, RandomSource.seeded(99));
        List<Verification> c = run(target, drafts, q, RandomSource.seeded(100));
        assertEquals(a, b);
        assertNotEquals(a, c);
    }

    private List<Verification> run(float[][] target, int[] drafts, float[][] q, RandomSource rng) {
        List<Verification> out = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            out.add(verifier.verify(target, drafts, q, sampled, rng));
        }
        return out;
    }

    // ---- shapes ------------------------------------------------------------------------------

    @Test
    void rejectsInconsistentShapes() {
        float[][] target = rows(4, 0, 1, 2);
        assertThrows(IllegalArgumentException.class,
                () -> verifier.verify(target, new int[] {0}, greedy, null)); // K+1 != 3
        assertThrows(IllegalArgumentException.class,
                () -> verifier.verify(target, new int[] {0, 4}, greedy, null)); // token >= V
        assertThrows(IllegalArgumentException.class,
                () -> verifier.verify(target, new int[] {0, -1}, greedy, null));
        assertThrows(IllegalArgumentException.class,
                () -> verifier.verify(new float[][] {new float[4], new float[5]}, new int[] {0}, greedy, null));
        assertThrows(IllegalArgumentException.class,
                () -> verifier.verify(target, new int[] {0, 1}, new float[1][4], sampled, RandomSource.seeded(1)));
        assertThrows(IllegalArgumentException.class,
                () -> verifier.verify(target, new int[] {0, 1}, new float[2][3], sampled, RandomSource.seeded(1)));
        assertThrows(IllegalArgumentException.class,
                () -> verifier.verify(target, new int[] {0, 1}, sampled, null));
    }

    @Test
    void verificationKeepsItsInvariant() {
        assertThrows(IllegalArgumentException.class, () -> new Verification(2, 1, new int[] {1}));
        assertThrows(IllegalArgumentException.class, () -> new Verification(2, 3, new int[] {1, 2, 3, 4}));
        int[] tokens = {4, 5};
        Verification v = new Verification(3, 1, tokens);
        tokens[0] = 9;
        assertEquals(4, v.outputToken(0), "defensive copy");
    }
}
