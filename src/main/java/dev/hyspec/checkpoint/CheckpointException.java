package dev.hyspec.checkpoint;

/** A checkpoint folder that cannot be loaded; the message names the file, key or tensor at fault. */
public class CheckpointException extends RuntimeException {
    public CheckpointException(String message) {
        super(message);
    }

    public CheckpointException(String message, Throwable cause) {
        super(message, cause);
    }
}
