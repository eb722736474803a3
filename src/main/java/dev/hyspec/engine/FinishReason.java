package dev.hyspec.engine;

import java.util.Locale;

/** Why a request stopped producing tokens (OpenAI's {@code finish_reason}, plus {@code abort} and {@code error}). */
public enum FinishReason {
    /** A stop token (EOS or one of the request's stop ids) was generated. */
    STOP,
    /** {@code max_tokens} reached, or the model's context is full. */
    LENGTH,
    /** The client went away or cancelled. */
    ABORT,
    /** The engine failed while running the request. */
    ERROR;

    /** The name used on the wire: {@code stop}, {@code length}, {@code abort}, {@code error}. */
    public String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
