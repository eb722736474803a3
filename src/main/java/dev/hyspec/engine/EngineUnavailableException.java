package dev.hyspec.engine;

/** The engine cannot take a request now (overloaded or shutting down): HTTP 503 with {@code Retry-After}. */
public class EngineUnavailableException extends RuntimeException {
    private final int retryAfterSeconds;

    public EngineUnavailableException(String message, int retryAfterSeconds) {
        super(message);
        this.retryAfterSeconds = retryAfterSeconds;
    }

    public int retryAfterSeconds() {
        return retryAfterSeconds;
    }
}
