package dev.hyspec.spec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

class NgramDrafterTest {

    private static int[] propose(NgramDrafter drafter, int... history) {
        return drafter.propose(history, history.length, drafter.k());
    }

    private static int[] ints(int... values) {
        return values;
    }

    @Test
    void vllmDocstringExample() {
        // [4 2 3] does not recur; [2 3] occurs at start 1 and only three tokens follow it.
        assertArrayEquals(ints(4, 2, 3), propose(new NgramDrafter(2, 3, 4), 1, 2, 3, 4, 2, 3));
    }

    @Test
    void classDocExample() {
        int[] history = {2, 3, 9, 1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3};
        assertArrayEquals(ints(4, 1, 2), propose(new NgramDrafter(2, 3, 3), history));
        // k larger than what follows the occurrence: truncated at the end of the history.
        assertArrayEquals(
                ints(4, 1, 2, 3, 5, 1, 2, 3), propose(new NgramDrafter(2, 3, 10), history));
    }

    @Test
    void repetitiveSequence() {
        NgramDrafter drafter = new NgramDrafter(1, 3, 4);
        // Suffix [3 1 2] first occurs at start 2; indices 5..7 follow it.
        assertArrayEquals(ints(3, 1, 2), propose(drafter, 1, 2, 3, 1, 2, 3, 1, 2));
        // A long period-3 history: the earliest occurrence leaves a full k tokens.
        int[] periodic = new int[30];
        for (int i = 0; i < periodic.length; i++) {
            periodic[i] = i % 3;
        }
        // Suffix [0 1 2] (ends at index 29, 29 % 3 == 2) first occurs at start 0.
        assertArrayEquals(ints(0, 1, 2, 0), propose(drafter, periodic));
    }

    @Test
    void noMatchGivesEmpty() {
        NgramDrafter drafter = new NgramDrafter(1, 3, 4);
        assertEquals(0, propose(drafter, 1, 2, 3, 4, 5).length);
        assertEquals(0, propose(drafter, 5, 5, 5, 4).length);
        assertEquals(0, propose(drafter).length);
        assertEquals(0, propose(drafter, 7).length);
    }

    @Test
    void matchAtTheVeryEnd() {
        NgramDrafter drafter = new NgramDrafter(1, 2, 4);
        // [9 9] does not recur; [9] occurs at index 3, immediately before the last token, so
        // exactly one token (the last one) follows it.
        assertArrayEquals(ints(9), propose(drafter, 1, 2, 3, 9, 9));
        // Overlapping occurrence: [7 7 7] at start 0 overlaps the suffix at start 1.
        assertArrayEquals(ints(7), propose(new NgramDrafter(1, 3, 5), 7, 7, 7, 7));
        // Run of equal tokens with maxN smaller than the run: the earliest 2-gram occurrence.
        assertArrayEquals(ints(7, 7, 7), propose(new NgramDrafter(1, 2, 5), 7, 7, 7, 7, 7));
    }

    @Test
    void proposalIsCappedByKAndByNumDrafts() {
        NgramDrafter drafter = new NgramDrafter(1, 2, 3);
        int[] history = {1, 2, 3, 4, 5, 6, 1, 2};
        assertArrayEquals(ints(3, 4, 5), drafter.propose(history, history.length, 10));
        assertArrayEquals(ints(3, 4), drafter.propose(history, history.length, 2));
        assertArrayEquals(ints(), drafter.propose(history, history.length, 0));
    }

    @Test
    void minNBoundary() {
        // Only a 1-gram recurs ([3] at index 2): usable with minN = 1, not with minN = 2.
        int[] history = {1, 2, 3, 9, 3};
        assertArrayEquals(ints(9, 3), propose(new NgramDrafter(1, 3, 4), history));
        assertEquals(0, propose(new NgramDrafter(2, 3, 4), history).length);
        // A 2-gram recurs exactly: minN = maxN = 2.
        assertArrayEquals(ints(3, 1), propose(new NgramDrafter(2, 2, 2), 1, 2, 3, 1, 2));
        // History no longer than minN can never match.
        assertEquals(0, propose(new NgramDrafter(2, 2, 2), 4, 4).length);
        assertArrayEquals(ints(4), propose(new NgramDrafter(2, 2, 2), 4, 4, 4));
    }

    @Test
    void longestNPreferredOverEarlierShorterMatch() {
        int[] history = {2, 3, 7, 1, 2, 3, 8, 1, 2, 3};
        // maxN = 3: [1 2 3] recurs at start 3 and wins over the earlier [2 3] at start 0.
        assertArrayEquals(ints(8, 1, 2), propose(new NgramDrafter(1, 3, 3), history));
        // maxN = 2 caps the n-gram: the earliest [2 3] (start 0) is used.
        assertArrayEquals(ints(7, 1, 2), propose(new NgramDrafter(1, 2, 3), history));
        // maxN = 5: neither [3 8 1 2 3] nor [8 1 2 3] recurs, so [1 2 3] is still the longest.
        assertArrayEquals(ints(8, 1, 2), propose(new NgramDrafter(1, 5, 3), history));
    }

    @Test
    void earliestOccurrenceAmongEquallyLongMatches() {
        int[] history = {1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3};
        assertArrayEquals(ints(4, 1, 2), propose(new NgramDrafter(3, 3, 3), history));
    }

    @Test
    void ignoresBufferBeyondLengthAndDoesNotModifyIt() {
        int[] buffer = {1, 2, 3, 4, 1, 2, 99, 98, 97};
        int[] before = buffer.clone();
        int[] drafts = new NgramDrafter(1, 3, 5).propose(buffer, 6, 5);
        assertArrayEquals(ints(3, 4, 1, 2), drafts);
        assertArrayEquals(before, buffer);
    }

    @Test
    void constructorValidation() {
        assertMessageContains("minN", () -> new NgramDrafter(0, 3, 4));
        assertMessageContains("minN", () -> new NgramDrafter(-1, 3, 4));
        assertMessageContains("maxN", () -> new NgramDrafter(3, 2, 4));
        assertMessageContains("k", () -> new NgramDrafter(1, 3, 0));
        NgramDrafter ok = new NgramDrafter(1, 1, 1);
        assertEquals(1, ok.minN());
        assertEquals(1, ok.maxN());
        assertEquals(1, ok.k());
    }

    @Test
    void proposeArgumentValidation() {
        NgramDrafter drafter = new NgramDrafter(1, 3, 4);
        assertMessageContains("tokens", () -> drafter.propose(null, 0, 1));
        assertMessageContains("length", () -> drafter.propose(new int[2], 3, 1));
        assertMessageContains("length", () -> drafter.propose(new int[2], -1, 1));
        assertMessageContains("numDrafts", () -> drafter.propose(new int[2], 2, -1));
    }

    private static void assertMessageContains(String word, Runnable action) {
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, action::run);
        assertTrue(e.getMessage().contains(word), () -> "message '" + e.getMessage()
                + "' should name " + word);
    }

    /**
     * Straightforward transcription of the documented rule: for n from maxN down to minN, find
     * the smallest start s < L - n whose n tokens equal the suffix, and return what follows.
     */
    private static int[] bruteForce(int[] t, int length, int minN, int maxN, int k, int numDrafts) {
        int budget = Math.min(k, numDrafts);
        for (int n = maxN; n >= minN; n--) {
            if (n >= length) {
                continue;
            }
            for (int s = 0; s < length - n; s++) {
                boolean equal = true;
                for (int j = 0; j < n && equal; j++) {
                    equal = t[s + j] == t[length - n + j];
                }
                if (equal) {
                    int from = s + n;
                    return Arrays.copyOfRange(t, from, Math.min(from + budget, length));
                }
            }
        }
        return new int[0];
    }

    @Test
    void randomizedAgainstBruteForce() {
        Random random = new Random(0x5eedL);
        int nonEmpty = 0;
        for (int trial = 0; trial < 50_000; trial++) {
            int alphabet = 1 + random.nextInt(4);
            int length = random.nextInt(33);
            int[] buffer = new int[length + random.nextInt(4)];
            for (int i = 0; i < buffer.length; i++) {
                buffer[i] = i < length ? random.nextInt(alphabet) : -1 - random.nextInt(3);
            }
            int minN = 1 + random.nextInt(4);
            int maxN = minN + random.nextInt(5);
            int k = 1 + random.nextInt(7);
            int numDrafts = random.nextInt(9);
            int[] expected = bruteForce(buffer, length, minN, maxN, k, numDrafts);
            int[] actual = new NgramDrafter(minN, maxN, k).propose(buffer, length, numDrafts);
            int[] history = Arrays.copyOf(buffer, length);
            assertArrayEquals(
                    expected,
                    actual,
                    () -> "history=" + Arrays.toString(history) + " minN=" + minN + " maxN="
                            + maxN + " k=" + k + " numDrafts=" + numDrafts);
            if (actual.length > 0) {
                nonEmpty++;
            }
        }
        // Make sure the comparison exercised plenty of actual proposals, not just empty ones.
        assertTrue(nonEmpty > 10_000, "only " + nonEmpty + " non-empty proposals");
    }
}
