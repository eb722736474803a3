package dev.hyspec.engine;

import dev.hyspec.sampling.TokenLogprob;

/**
 * What a request's stream carries. The first event says the engine admitted the request
 * ({@link #admitted()}: no tokens, {@code stats} names the strategy); then events with newly
 * generated tokens (and their logprobs when asked for); the last one carries the finish reason (with
 * a message for {@code error}) and the request's final {@link RequestStats}.
 */
public record TokenEvent(int[] tokens, TokenLogprob[] logprobs, FinishReason finishReason, String error,
                         RequestStats stats) {

    static TokenEvent admitted(RequestStats stats) {
        return new TokenEvent(new int[0], null, null, null, stats);
    }

    public boolean admitted() {
        return finishReason == null && stats != null;
    }

    public boolean last() {
        return finishReason != null;
    }
}
