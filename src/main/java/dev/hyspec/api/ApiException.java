package dev.hyspec.api;

/**
 * A request the API refuses, with what the OpenAI error object needs: HTTP status, {@code type},
 * the request field at fault ({@code param}) and an optional {@code code}.
 */
public class ApiException extends RuntimeException {
    private final int status;
    private final String type;
    private final String param;
    private final String code;
    private final int retryAfterSeconds;

    public ApiException(int status, String type, String param, String code, String message, int retryAfterSeconds) {
        super(message);
        this.status = status;
        this.type = type;
        this.param = param;
        this.code = code;
        this.retryAfterSeconds = retryAfterSeconds;
    }

    /** 400 {@code invalid_request_error} naming {@code param}. */
    public static ApiException badRequest(String param, String message) {
        return new ApiException(400, "invalid_request_error", param, null, message, 0);
    }

    /** 400 naming {@code param}, with an error code (e.g. {@code model_not_found}). */
    public static ApiException badRequest(String param, String code, String message) {
        return new ApiException(400, "invalid_request_error", param, code, message, 0);
    }

    /** 503: try again after {@code retryAfterSeconds}. */
    public static ApiException unavailable(String code, String message, int retryAfterSeconds) {
        return new ApiException(503, "service_unavailable_error", null, code, message, retryAfterSeconds);
    }

    public int status() {
        return status;
    }

    public String type() {
        return type;
    }

    public String param() {
        return param;
    }

    public String code() {
        return code;
    }

    /** Seconds for a {@code Retry-After} header; 0: none. */
    public int retryAfterSeconds() {
        return retryAfterSeconds;
    }
}
