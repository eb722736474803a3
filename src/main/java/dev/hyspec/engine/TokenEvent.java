package dev.hyspec.engine;

/**
 * What a request's stream carries: newly generated tokens, and on the last event the finish reason
 * (with a message for {@code error}).
 */
public record TokenEvent(int[] tokens, FinishReason finishReason, String error) {
    public boolean last() {
        return finishReason != null;
    }
}
