package dev.hyspec.spec;

import java.util.Arrays;

/**
 * Prompt-lookup ("n-gram") drafter, a port of vLLM v1's {@code NgramProposer}
 * ({@code vllm/v1/spec_decode/ngram_proposer.py}, function {@code
 * _find_longest_matched_ngram_and_propose_tokens}).
 *
 * <p>It bets that the text is about to repeat something it already contains (code being edited,
 * quoted documents, lists, retrieval contexts): it looks for an earlier occurrence of the
 * history's last few tokens and proposes the tokens that followed that occurrence.
 *
 * <h2>Rule</h2>
 *
 * <p>Given the history {@code t[0, L)}:
 *
 * <ol>
 *   <li>Let {@code n} be the largest value in {@code [minN, maxN]} such that the suffix {@code
 *       t[L-n, L)} also occurs at some earlier start {@code s < L-n}. Earlier occurrences may
 *       overlap the suffix itself. If no such {@code n} exists (including when {@code L <= minN}),
 *       propose nothing. A longer match always wins over a shorter one, however recent.
 *   <li>Among the occurrences of that longest suffix, take the <b>earliest</b> one (smallest
 *       {@code s}).
 *   <li>Propose {@code t[s+n, min(s+n+d, L))} with {@code d = min(k, numDrafts)}: the tokens that
 *       followed the occurrence, truncated where the history ends. Since {@code s+n < L}, a match
 *       always yields at least one token when {@code d >= 1}.
 * </ol>
 *
 * <p><b>Why the earliest occurrence.</b> This is exactly what vLLM v1 does (its reversed-sequence
 * KMP keeps the last match in reversed order, i.e. the earliest in original order), so
 * acceptance rates measured here are comparable with vLLM's for the same {@code
 * prompt_lookup_min/max} and {@code num_speculative_tokens}. It also maximises the continuation
 * available in the history: an occurrence near the end of the history is often followed by fewer
 * than {@code k} tokens, whereas the earliest one is followed by the most. The price is that a
 * more recent (possibly more relevant) repetition of the same n-gram is ignored.
 *
 * <h2>Worked example</h2>
 *
 * <pre>
 *   minN = 2, maxN = 3, k = 3
 *
 *   index:  0  1  2  3  4  5  6  7  8  9 10 11 12 13
 *   token:  2  3  9  1  2  3  4  1  2  3  5  1  2  3      (L = 14)
 * </pre>
 *
 * <ul>
 *   <li>n = 3: the suffix is {@code [1 2 3]} (indices 11..13). It occurred earlier at starts 3 and
 *       7, so n = 3 is the longest usable n-gram. ({@code [2 3]} occurs even earlier, at start 0,
 *       but a longer match takes precedence.)
 *   <li>Earliest occurrence: start 3 (indices 3..5). The tokens after it begin at index 6.
 *   <li>Proposal: {@code t[6, 9) = [4 1 2]}. With {@code k = 10} the proposal would be {@code
 *       t[6, 14) = [4 1 2 3 5 1 2 3]}, eight tokens, because the history ends there. The more
 *       recent occurrence at start 7 would have proposed {@code [5 1 2]}.
 * </ul>
 *
 * <p>Overlap example: history {@code [7 7 7 7]}, {@code minN = 1, maxN = 3}: the suffix {@code [7 7
 * 7]} (indices 1..3) occurs earlier at start 0 (indices 0..2, overlapping the suffix), so the
 * proposal is {@code t[3, 4) = [7]}. vLLM's example: history {@code [1 2 3 4 2 3]}, {@code minN =
 * 2, maxN = 3, k = 4}: {@code [4 2 3]} does not recur, {@code [2 3]} occurs at start 1, so the
 * proposal is {@code [4 2 3]} (only three tokens follow).
 *
 * <h2>Cost</h2>
 *
 * <p>One backwards Knuth-Morris-Pratt pass over the history: the reversed history is matched
 * against its own prefix (the reversed suffix), with the prefix capped at {@code maxN} tokens.
 * That is {@code O(L)} time regardless of {@code maxN}; the only allocations are an {@code
 * int[maxN]} failure table and the result array. Instances are immutable and thread-safe, so one
 * instance can serve every request.
 */
public final class NgramDrafter implements Drafter {

    private static final int[] EMPTY = new int[0];

    private final int minN;
    private final int maxN;
    private final int k;

    /**
     * @param minN smallest n-gram length that may be matched, {@code >= 1}
     * @param maxN largest n-gram length that may be matched, {@code >= minN}
     * @param k maximum number of tokens proposed per step, {@code >= 1}
     * @throws IllegalArgumentException naming the offending parameter
     */
    public NgramDrafter(int minN, int maxN, int k) {
        if (minN < 1) {
            throw new IllegalArgumentException("minN must be >= 1, got " + minN);
        }
        if (maxN < minN) {
            throw new IllegalArgumentException(
                    "maxN must be >= minN (" + minN + "), got " + maxN);
        }
        if (k < 1) {
            throw new IllegalArgumentException("k must be >= 1, got " + k);
        }
        this.minN = minN;
        this.maxN = maxN;
        this.k = k;
    }

    public int minN() {
        return minN;
    }

    public int maxN() {
        return maxN;
    }

    public int k() {
        return k;
    }

    /**
     * Proposes up to {@code min(k, numDrafts)} tokens following the earliest earlier occurrence of
     * the longest suffix n-gram ({@code minN <= n <= maxN}); see the class documentation.
     */
    @Override
    public int[] propose(int[] tokens, int length, int numDrafts) {
        Drafter.checkProposeArgs(tokens, length, numDrafts);
        int budget = Math.min(k, numDrafts);
        if (budget == 0 || length <= minN) {
            // A suffix of length n needs at least one more token before it to recur.
            return EMPTY;
        }

        // Work on the reversed history r[x] = tokens[last - x]. The reversed suffix n-gram is the
        // prefix r[0, n), and an occurrence of the original n-gram starting at s corresponds to
        // r[0, n) ending at reversed index last - s. Matching r against its own prefix (capped at
        // maxN) with KMP yields, for every reversed index i >= 1, the longest m <= maxN with
        // r[i+1-m, i+1) == r[0, m), where m <= i (a proper prefix-suffix), i.e. s < L - n.
        final int last = length - 1;
        // lps[j] = length of the longest proper prefix of r[0, j+1) that is also its suffix.
        int[] lps = new int[maxN];
        int longest = 0;
        int position = 0; // reversed index where the chosen occurrence ends
        int matched = 0;
        int i = 1;
        while (i < length) {
            if (tokens[last - matched] == tokens[last - i]) {
                matched++;
                // ">=": among equally long matches keep the largest reversed index, i.e. the
                // earliest occurrence in the original order.
                if (matched >= longest) {
                    longest = matched;
                    position = i;
                }
                if (i < maxN) {
                    lps[i] = matched;
                }
                if (matched == maxN) {
                    // Do not grow beyond maxN; fall back to the next-longest border.
                    matched = lps[maxN - 1];
                }
                i++;
            } else if (matched != 0) {
                matched = lps[matched - 1];
            } else {
                i++;
            }
        }

        if (longest < minN) {
            return EMPTY;
        }
        // The occurrence spans original indices [last - position, last - position + longest).
        int start = last - position + longest;
        int count = Math.min(budget, length - start);
        return Arrays.copyOfRange(tokens, start, start + count);
    }

    @Override
    public String toString() {
        return "NgramDrafter[minN=" + minN + ", maxN=" + maxN + ", k=" + k + "]";
    }
}
