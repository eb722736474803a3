package dev.hyspec.engine;

/**
 * What one request went through, reported when it is admitted (counts zero) and when it finishes.
 *
 * @param strategy            the rollback strategy it ran with
 * @param promptTokens        prompt length
 * @param cachedPromptTokens  prompt tokens served by the prefix cache (OpenAI's {@code cached_tokens})
 * @param outputTokens        tokens generated
 * @param draftTokens         draft tokens proposed and verified
 * @param acceptedDraftTokens of those, accepted
 */
public record RequestStats(String strategy, int promptTokens, int cachedPromptTokens, int outputTokens,
                           long draftTokens, long acceptedDraftTokens) {

    /** Accepted drafts over proposed drafts; 0 when none were proposed. */
    public double acceptanceRate() {
        return draftTokens == 0 ? 0 : (double) acceptedDraftTokens / draftTokens;
    }
}
