package dev.hyspec.sampling;

import java.util.Arrays;

/**
 * The outcome of verifying one row of {@code K} draft tokens (see {@link SpeculativeVerifier} for
 * the vocabulary).
 *
 * <p>{@code outputTokens} holds the {@code numAcceptedTokens} accepted drafts followed by exactly
 * one more token: the bonus token when every draft was accepted
 * ({@code numAcceptedTokens == numDraftTokens}), else the recovered token at the first rejected
 * position. So {@code outputTokens.length == numAcceptedTokens + 1}, between 1 and {@code K + 1};
 * unlike vLLM's padded tensor there are no {@code PLACEHOLDER_TOKEN_ID} (-1) entries.
 *
 * <p>The scheduler advances the request by {@code outputTokens.length} tokens ({@code L ← L + a}
 * in DESIGN §3, {@code a = outputTokens.length}); stop-token and {@code maxTokens} truncation are
 * the caller's business.
 *
 * @param numDraftTokens    {@code K}, the number of drafts verified
 * @param numAcceptedTokens accepted drafts, {@code 0 ≤ numAcceptedTokens ≤ K}
 * @param outputTokens      accepted drafts + one bonus or recovered token (defensively copied)
 */
public record Verification(int numDraftTokens, int numAcceptedTokens, int[] outputTokens) {

    public Verification {
        if (numDraftTokens < 0 || numAcceptedTokens < 0 || numAcceptedTokens > numDraftTokens) {
            throw new IllegalArgumentException("bad counts: numDraftTokens=" + numDraftTokens
                    + ", numAcceptedTokens=" + numAcceptedTokens);
        }
        if (outputTokens.length != numAcceptedTokens + 1) {
            throw new IllegalArgumentException("outputTokens.length must be numAcceptedTokens + 1 = "
                    + (numAcceptedTokens + 1) + ", got " + outputTokens.length);
        }
        outputTokens = outputTokens.clone();
    }

    /** A copy of the output tokens. */
    @Override
    public int[] outputTokens() {
        return outputTokens.clone();
    }

    /** {@code a}: how many tokens this step commits (accepted drafts + 1). */
    public int numOutputTokens() {
        return outputTokens.length;
    }

    /** The {@code i}-th output token. */
    public int outputToken(int i) {
        return outputTokens[i];
    }

    /** The token after the accepted drafts: the next step's input {@code x_0}. */
    public int lastToken() {
        return outputTokens[outputTokens.length - 1];
    }

    /** Whether every draft was accepted, so the last output token is a bonus token. */
    public boolean allAccepted() {
        return numAcceptedTokens == numDraftTokens;
    }

    /**
     * Drafts not accepted ({@code K − accepted}): the first was rejected and replaced by the
     * recovered token, the ones after it were discarded unexamined.
     */
    public int numRejectedTokens() {
        return numDraftTokens - numAcceptedTokens;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Verification v
                && v.numDraftTokens == numDraftTokens
                && v.numAcceptedTokens == numAcceptedTokens
                && Arrays.equals(v.outputTokens, outputTokens);
    }

    @Override
    public int hashCode() {
        return 31 * (31 * numDraftTokens + numAcceptedTokens) + Arrays.hashCode(outputTokens);
    }

    @Override
    public String toString() {
        return "Verification[numDraftTokens=" + numDraftTokens + ", numAcceptedTokens="
                + numAcceptedTokens + ", outputTokens=" + Arrays.toString(outputTokens) + "]";
    }
}
