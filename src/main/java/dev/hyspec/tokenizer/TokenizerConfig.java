package dev.hyspec.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The parts of a checkpoint's {@code tokenizer_config.json} that serving needs: the BOS and EOS
 * token strings and the chat template.
 */
final class TokenizerConfig {
    static final String FILE_NAME = "tokenizer_config.json";

    private final Path file;
    private final Optional<String> bosToken;
    private final Optional<String> eosToken;
    private final Optional<String> chatTemplate;

    private TokenizerConfig(
            Path file, Optional<String> bosToken, Optional<String> eosToken, Optional<String> chatTemplate) {
        this.file = file;
        this.bosToken = bosToken;
        this.eosToken = eosToken;
        this.chatTemplate = chatTemplate;
    }

    /**
     * Reads {@code tokenizer_config.json} from {@code checkpointDir}.
     *
     * @return empty when the folder has no such file
     * @throws TokenizerException naming the file when it is unreadable or malformed
     */
    static Optional<TokenizerConfig> read(Path checkpointDir) {
        Path file = checkpointDir.resolve(FILE_NAME);
        if (!Files.isRegularFile(file)) {
            return Optional.empty();
        }
        JsonNode root = JsonFiles.readObject(file);
        return Optional.of(new TokenizerConfig(
                file,
                specialToken(file, root, "bos_token"),
                specialToken(file, root, "eos_token"),
                chatTemplate(file, root)));
    }

    Path file() {
        return file;
    }

    Optional<String> bosToken() {
        return bosToken;
    }

    Optional<String> eosToken() {
        return eosToken;
    }

    /** The template source; when the file lists several named templates, the one named "default". */
    Optional<String> chatTemplate() {
        return chatTemplate;
    }

    // transformers writes special tokens either as plain strings or as serialized AddedToken objects.
    private static Optional<String> specialToken(Path file, JsonNode root, String field) {
        JsonNode node = root.get(field);
        if (node == null || node.isNull()) {
            return Optional.empty();
        }
        if (node.isTextual()) {
            return Optional.of(node.textValue());
        }
        if (node.isObject()) {
            JsonNode content = node.get("content");
            if (content != null && content.isTextual()) {
                return Optional.of(content.textValue());
            }
            throw new TokenizerException(file + ": \"" + field
                    + "\" is an object without a string \"content\" field");
        }
        throw new TokenizerException(file + ": \"" + field
                + "\" must be a string or an object with a \"content\" field, found " + JsonFiles.describe(node));
    }

    private static Optional<String> chatTemplate(Path file, JsonNode root) {
        JsonNode node = root.get("chat_template");
        if (node == null || node.isNull()) {
            return Optional.empty();
        }
        if (node.isTextual()) {
            return Optional.of(node.textValue());
        }
        if (!node.isArray()) {
            throw new TokenizerException(file + ": \"chat_template\" must be a string or a list of"
                    + " {\"name\", \"template\"} objects, found " + JsonFiles.describe(node));
        }
        List<String> names = new ArrayList<>();
        for (JsonNode entry : node) {
            JsonNode name = entry.get("name");
            JsonNode template = entry.get("template");
            if (!entry.isObject() || name == null || !name.isTextual() || template == null || !template.isTextual()) {
                throw new TokenizerException(file + ": every entry of \"chat_template\" must be an object with"
                        + " string fields \"name\" and \"template\"");
            }
            if (name.textValue().equals("default")) {
                return Optional.of(template.textValue());
            }
            names.add(name.textValue());
        }
        throw new TokenizerException(file + ": \"chat_template\" lists named templates " + names
                + " but none is named \"default\"");
    }
}
