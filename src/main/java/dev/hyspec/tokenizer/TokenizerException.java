package dev.hyspec.tokenizer;

/**
 * A tokenizer or chat-template file that cannot be used; the message names the file and what is
 * wrong with it.
 */
public class TokenizerException extends RuntimeException {
    public TokenizerException(String message) {
        super(message);
    }

    public TokenizerException(String message, Throwable cause) {
        super(message, cause);
    }
}
