package dev.hyspec.tokenizer;

import java.util.Objects;

/**
 * One turn of a conversation as a chat template sees it: {@code message['role']} and
 * {@code message['content']}.
 *
 * @param role the speaker, e.g. {@code system}, {@code user} or {@code assistant}; never null
 * @param content the text of the turn; may be null (a template then sees {@code none})
 */
public record ChatMessage(String role, String content) {
    public ChatMessage {
        Objects.requireNonNull(role, "role");
    }
}
