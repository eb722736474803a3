package dev.hyspec.spec;

/**
 * Proposes draft tokens for speculative decoding.
 *
 * <p>Once per engine step, for every running request that speculates, the engine calls
 * {@link #propose} with the request's token history (prompt followed by every token generated so
 * far) and a draft budget. The returned tokens are a guess at the next tokens the target model
 * will produce; the target model then verifies them all in one forward pass, accepts the longest
 * correct prefix, and appends the accepted drafts plus one token of its own (the correction or
 * "bonus" token) to the history. The next step calls {@code propose} again with the longer
 * history.
 *
 * <h2>Contract of {@code propose}</h2>
 *
 * <ul>
 *   <li>Only {@code tokens[0, length)} is the history; entries at and beyond {@code length} are
 *       unspecified (the engine may pass a larger reusable buffer). The drafter must not modify
 *       {@code tokens} and must not keep a reference to it after returning.
 *   <li>The result holds between {@code 0} and {@code numDrafts} tokens, inclusive, in proposal
 *       order: element {@code 0} is the guess for the token at index {@code length}. An empty array
 *       means "no proposal this step"; the engine then decodes that request normally. The result
 *       is never {@code null} and belongs to the caller.
 *   <li>{@code numDrafts == 0} is legal and yields an empty array (e.g. near the request's
 *       token limit). Implementations reject {@code numDrafts < 0}, {@code length < 0} and {@code
 *       length > tokens.length} with {@link IllegalArgumentException}.
 *   <li>Drafts are only suggestions: correctness of the output never depends on them, only the
 *       acceptance rate (and hence speed) does.
 * </ul>
 *
 * <h2>Stateful drafters (draft models, MTP heads)</h2>
 *
 * <p>Stateless drafters such as {@link NgramDrafter} derive everything from the history, so one
 * instance may be shared by all requests and threads. Drafters that carry state across steps (a
 * small draft model with its own KV/SSM cache, an MTP head consuming the target's hidden states,
 * or {@link ScriptedDrafter}'s step counter) are <em>request-scoped</em>: the engine obtains one
 * instance per request (e.g. from a {@code Supplier<Drafter>}) and calls it from one thread at a
 * time. Such a drafter learns what happened to its last proposal through {@link #onAccepted},
 * which lets it roll back or commit its own cache without re-deriving it from the history. The
 * interface is deliberately minimal; richer hooks (hidden-state inputs, request teardown) can be
 * added as default methods without breaking existing implementations.
 */
public interface Drafter {

    /**
     * Proposes up to {@code numDrafts} tokens to follow {@code tokens[0, length)}.
     *
     * @param tokens history buffer: prompt then generated tokens; only the first {@code length}
     *     entries are meaningful and it is never modified
     * @param length number of valid history tokens, {@code 0 <= length <= tokens.length}
     * @param numDrafts maximum number of drafts the engine will verify this step, {@code >= 0}
     * @return a fresh array of {@code 0..numDrafts} draft tokens, never {@code null}
     */
    int[] propose(int[] tokens, int length, int numDrafts);

    /**
     * Reports the verification result of the most recent {@link #propose} call: of the {@code
     * numProposed} tokens it returned, the first {@code numAccepted} were accepted ({@code 0 <=
     * numAccepted <= numProposed}). The engine then appended those drafts plus one target token to
     * the history. Called at most once per {@code propose}, before the next {@code propose}; not
     * called when the proposal was empty or the request finished. The default does nothing, which
     * is right for stateless drafters.
     *
     * @param numProposed length of the array the last {@code propose} returned
     * @param numAccepted how many of those drafts the target accepted
     */
    default void onAccepted(int numProposed, int numAccepted) {}

    /** Shared argument validation for implementations of {@link #propose}. */
    static void checkProposeArgs(int[] tokens, int length, int numDrafts) {
        if (tokens == null) {
            throw new IllegalArgumentException("tokens must not be null");
        }
        if (length < 0 || length > tokens.length) {
            throw new IllegalArgumentException(
                    "length must be in [0, tokens.length=" + tokens.length + "], got " + length);
        }
        if (numDrafts < 0) {
            throw new IllegalArgumentException("numDrafts must be >= 0, got " + numDrafts);
        }
    }
}
