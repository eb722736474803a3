package dev.hyspec.spec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.IntUnaryOperator;
import org.junit.jupiter.api.Test;

class ScriptedDrafterTest {

    private static final int[] PROMPT = {40, 41, 42, 43, 44};

    @Test
    void fromStepsProposesEachStepThenNothing() {
        List<int[]> steps = new ArrayList<>();
        steps.add(new int[] {1, 2, 3});
        steps.add(new int[] {});
        steps.add(new int[] {4, 5, 6, 7});
        ScriptedDrafter drafter = ScriptedDrafter.fromSteps(steps);
        steps.get(0)[0] = 99; // the drafter copied the script
        int[] history = {9, 9};

        assertArrayEquals(new int[] {1, 2, 3}, drafter.propose(history, 2, 5));
        assertArrayEquals(new int[] {}, drafter.propose(history, 2, 5));
        assertArrayEquals(new int[] {4, 5}, drafter.propose(history, 2, 2)); // truncated
        assertArrayEquals(new int[] {}, drafter.propose(history, 2, 5)); // script exhausted
        assertEquals(4, drafter.steps());
        List<int[]> proposals = drafter.proposals();
        assertEquals(4, proposals.size());
        assertArrayEquals(new int[] {4, 5}, proposals.get(2));
    }

    @Test
    void ofRunsArbitraryScriptsAndRecordsAcceptance() {
        ScriptedDrafter drafter =
                ScriptedDrafter.of(
                        (step, tokens, length, numDrafts) ->
                                step == 1 ? null : new int[] {step, tokens[length - 1]});
        int[] history = {3, 8};
        assertArrayEquals(new int[] {0, 8}, drafter.propose(history, 2, 4));
        drafter.onAccepted(2, 1);
        assertArrayEquals(new int[] {}, drafter.propose(history, 2, 4));
        assertArrayEquals(new int[] {2, 3}, drafter.propose(history, 1, 4));
        assertArrayEquals(new int[] {}, drafter.propose(history, 1, 0));
        drafter.onAccepted(2, 2);
        assertArrayEquals(new int[] {1, 2}, drafter.acceptedCounts());
        assertEquals(4, drafter.steps());
    }

    /** Minimal greedy verifier: accepts the longest prefix of drafts that equals the target. */
    private static int greedyAccept(int[] drafts, int[] reference, int position) {
        int accepted = 0;
        while (accepted < drafts.length
                && position + accepted < reference.length
                && drafts[accepted] == reference[position + accepted]) {
            accepted++;
        }
        return accepted;
    }

    /**
     * Runs a speculative greedy decode of {@code reference} after {@link #PROMPT} with the given
     * drafter and budget, checking every proposal, and returns the accepted count of each step.
     */
    private static int[] decode(
            ScriptedDrafter drafter,
            int[] reference,
            IntUnaryOperator acceptedPerStep,
            int k,
            int numDrafts,
            int vocab) {
        int[] history = new int[PROMPT.length + reference.length + k + 1];
        System.arraycopy(PROMPT, 0, history, 0, PROMPT.length);
        int length = PROMPT.length;
        List<Integer> acceptedCounts = new ArrayList<>();
        for (int step = 0; length - PROMPT.length < reference.length; step++) {
            int p = length - PROMPT.length;
            int a = acceptedPerStep.applyAsInt(step);
            int[] drafts = drafter.propose(history, length, numDrafts);

            int expectedLength = Math.min(Math.min(k, numDrafts), reference.length - p);
            assertEquals(expectedLength, drafts.length, "proposal length at step " + step);
            for (int j = 0; j < drafts.length; j++) {
                assertTrue(drafts[j] >= 0 && drafts[j] < vocab, "draft out of vocabulary");
                if (j == a) {
                    assertNotEquals(reference[p + j], drafts[j], "wrong token at step " + step);
                } else {
                    // Before the wrong token: correct; after it: correct again by design.
                    assertEquals(reference[p + j], drafts[j], "draft " + j + " at step " + step);
                }
            }

            int accepted = greedyAccept(drafts, reference, p);
            assertEquals(Math.min(a, drafts.length), accepted, "accepted at step " + step);
            if (drafts.length > 0) {
                drafter.onAccepted(drafts.length, accepted);
            }
            acceptedCounts.add(accepted);
            // Append the accepted drafts and the target's own token.
            int emitted = Math.min(accepted + 1, reference.length - p);
            System.arraycopy(reference, p, history, length, emitted);
            length += emitted;
        }
        assertArrayEquals(
                reference, Arrays.copyOfRange(history, PROMPT.length, length), "decoded output");
        return acceptedCounts.stream().mapToInt(Integer::intValue).toArray();
    }

    @Test
    void forcingAcceptanceForcesExactCounts() {
        int vocab = 50;
        int k = 4;
        int[] reference = new Random(7).ints(60, 0, vocab).toArray();
        int[] plan = {0, 4, 1, 3, 2, 2, 0, 4, 4, 1};
        IntUnaryOperator perStep = step -> plan[step % plan.length];
        ScriptedDrafter drafter =
                ScriptedDrafter.forcingAcceptance(reference, PROMPT.length, perStep, k, vocab);

        int[] counts = decode(drafter, reference, perStep, k, k, vocab);

        // Every step before the reference runs out accepts exactly the planned count.
        int position = 0;
        for (int step = 0; step < counts.length; step++) {
            int remaining = reference.length - position;
            assertEquals(Math.min(plan[step % plan.length], remaining), counts[step], "step " + step);
            position += counts[step] + 1;
        }
        assertArrayEquals(counts, drafter.acceptedCounts());
        assertEquals(counts.length, drafter.steps());
    }

    @Test
    void forcingAcceptanceRespectsSmallerEngineBudget() {
        int vocab = 10;
        int k = 5;
        int[] reference = new Random(11).ints(30, 0, vocab).toArray();
        IntUnaryOperator perStep = step -> step % (k + 1);
        ScriptedDrafter drafter =
                ScriptedDrafter.forcingAcceptance(reference, PROMPT.length, perStep, k, vocab);
        // With a budget of 2, a planned count of 2..5 degrades to 2 (all drafts correct).
        int[] counts = decode(drafter, reference, perStep, k, 2, vocab);
        for (int step = 0; step < counts.length - 1; step++) {
            assertEquals(Math.min(step % (k + 1), 2), counts[step], "step " + step);
        }
    }

    @Test
    void forcingAcceptanceWrongTokenWrapsAroundVocabulary() {
        int vocab = 3;
        int[] reference = {2, 2, 2, 2};
        ScriptedDrafter drafter =
                ScriptedDrafter.forcingAcceptance(reference, PROMPT.length, step -> 1, 3, vocab);
        assertArrayEquals(new int[] {2, 0, 2}, drafter.propose(PROMPT, PROMPT.length, 3));
    }

    @Test
    void forcingAcceptanceRandomPlans() {
        Random random = new Random(123);
        for (int trial = 0; trial < 200; trial++) {
            int vocab = 2 + random.nextInt(20);
            int k = 1 + random.nextInt(6);
            int[] reference = random.ints(1 + random.nextInt(40), 0, vocab).toArray();
            int[] plan = random.ints(50, 0, k + 1).toArray();
            IntUnaryOperator perStep = step -> plan[step];
            int budget = random.nextInt(k + 2);
            ScriptedDrafter drafter =
                    ScriptedDrafter.forcingAcceptance(reference, PROMPT.length, perStep, k, vocab);
            decode(drafter, reference, perStep, k, budget, vocab);
        }
    }

    @Test
    void forcingAcceptanceDetectsDivergedHistory() {
        int[] reference = {1, 2, 3, 4};
        ScriptedDrafter drafter =
                ScriptedDrafter.forcingAcceptance(reference, 2, step -> 0, 2, 10);
        int[] diverged = {7, 7, 1, 9};
        IllegalStateException e =
                assertThrows(IllegalStateException.class, () -> drafter.propose(diverged, 4, 2));
        assertTrue(e.getMessage().contains("generated token 1"), e.getMessage());
        assertThrows(IllegalStateException.class, () -> drafter.propose(diverged, 1, 2));
        // Reference fully consumed: nothing to propose.
        int[] done = {7, 7, 1, 2, 3, 4};
        assertArrayEquals(new int[] {}, drafter.propose(done, 6, 2));
    }

    @Test
    void forcingAcceptanceValidation() {
        int[] ref = {1, 2};
        IntUnaryOperator zero = step -> 0;
        assertMessageContains(
                "referenceContinuation",
                () -> ScriptedDrafter.forcingAcceptance(null, 0, zero, 2, 10));
        assertMessageContains(
                "referenceContinuation",
                () -> ScriptedDrafter.forcingAcceptance(new int[] {1, 10}, 0, zero, 2, 10));
        assertMessageContains(
                "promptLength", () -> ScriptedDrafter.forcingAcceptance(ref, -1, zero, 2, 10));
        assertMessageContains(
                "acceptedPerStep", () -> ScriptedDrafter.forcingAcceptance(ref, 0, null, 2, 10));
        assertMessageContains("k", () -> ScriptedDrafter.forcingAcceptance(ref, 0, zero, 0, 10));
        assertMessageContains(
                "vocabSize", () -> ScriptedDrafter.forcingAcceptance(ref, 0, zero, 2, 1));
        ScriptedDrafter tooMany = ScriptedDrafter.forcingAcceptance(ref, 0, step -> 3, 2, 10);
        assertMessageContains("acceptedPerStep", () -> tooMany.propose(new int[0], 0, 2));
        assertMessageContains("steps", () -> ScriptedDrafter.fromSteps(null));
        assertMessageContains(
                "steps[0]", () -> ScriptedDrafter.fromSteps(Arrays.asList((int[]) null)));
        assertMessageContains("script", () -> ScriptedDrafter.of(null));
    }

    private static void assertMessageContains(String word, Runnable action) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, action::run);
        assertTrue(e.getMessage().contains(word), () -> "'" + e.getMessage() + "' should name " + word);
    }
}
