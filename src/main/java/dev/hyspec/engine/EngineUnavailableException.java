package dev.hyspec.engine;

/** The engine cannot take a request now (overloaded or shutting down): HTTP 503 with {@code Retry-After}. */
public class EngineUnavailableException extends RuntimeException {
    private final String code;
    private final int retryAfterSeconds;

    /**
     * @param code              why: {@code overloaded} or {@code draining}
     * @param retryAfterSeconds when a client should try again
     */
    public EngineUnavailableException(String code, String message, int retryAfterSeconds) {
        super(message);
        this.code = code;
        this.retryAfterSeconds = retryAfterSeconds;
    }

    public String code() {
        return code;
    }

    public int retryAfterSeconds() {
        return retryAfterSeconds;
    }
}
