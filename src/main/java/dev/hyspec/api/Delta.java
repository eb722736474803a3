package dev.hyspec.api;

import dev.hyspec.engine.RequestStats;
import java.util.List;

/**
 * One step of a generation as the API sees it: new text and token ids (and their logprobs), or the
 * end. The first delta of every stream is the admission ({@code admitted}: the request runs, with
 * the strategy in {@code stats}); the last one has a {@code finishReason}.
 *
 * @param admitted     the engine took the request (no text yet)
 * @param text         new text (may be empty, e.g. while a stop string might be starting)
 * @param tokenIds     the token ids generated in this step
 * @param logprobs     logprobs of those tokens when asked for, else null
 * @param finishReason OpenAI's finish reason ({@code stop}, {@code length}, {@code abort}, {@code error}), or null
 * @param stopReason   the stop string or stop token id that ended the request, or null
 * @param stats        strategy and counts (on the admission and the last delta)
 * @param error        what went wrong, when {@code finishReason} is {@code error}
 */
record Delta(boolean admitted, String text, int[] tokenIds, List<Logprob> logprobs, String finishReason,
             Object stopReason, RequestStats stats, String error) {

    /** A generated token's logprob, with its text and top alternatives. */
    record Logprob(String token, float logprob, List<Top> top) {}

    /** One alternative token at a position. */
    record Top(String token, float logprob) {}

    boolean last() {
        return finishReason != null;
    }
}
