package dev.hyspec.engine;

/** A request the engine refuses before running it; the message names the offending field. */
public class InvalidRequestException extends RuntimeException {
    private final String param;

    public InvalidRequestException(String param, String message) {
        super(message);
        this.param = param;
    }

    /** The request field at fault (OpenAI's {@code param}), or null. */
    public String param() {
        return param;
    }
}
