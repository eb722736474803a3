package dev.hyspec.tokenizer;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** Reads the text and JSON files of a checkpoint, turning every failure into a message naming the file. */
final class JsonFiles {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private JsonFiles() {}

    /**
     * The file's text, decoded strictly as UTF-8.
     *
     * @throws TokenizerException naming the file when it cannot be read or is not valid UTF-8
     */
    static String readText(Path file) {
        byte[] bytes;
        try {
            bytes = Files.readAllBytes(file);
        } catch (IOException e) {
            throw new TokenizerException(file + ": cannot be read: " + e, e);
        }
        try {
            // Strict decoding: a lenient one would hide a corrupt file behind U+FFFD characters.
            return StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            throw new TokenizerException(file + ": is not valid UTF-8 text", e);
        }
    }

    /**
     * Parses {@code text}, the contents of {@code file}, which must be a JSON object.
     *
     * @throws TokenizerException naming the file when the text is not JSON or not an object
     */
    static JsonNode parseObject(Path file, String text) {
        JsonNode root;
        try {
            root = MAPPER.readTree(text);
        } catch (JsonProcessingException e) {
            throw new TokenizerException(file + ": is not valid JSON: " + describe(e), e);
        }
        if (root == null || root.isMissingNode()) {
            throw new TokenizerException(file + ": is empty, expected a JSON object");
        }
        if (!root.isObject()) {
            throw new TokenizerException(
                    file + ": expected a JSON object at the top level, found " + describe(root));
        }
        return root;
    }

    /**
     * Reads and parses {@code file}, which must hold a JSON object.
     *
     * @throws TokenizerException naming the file when it is unreadable, not JSON or not an object
     */
    static JsonNode readObject(Path file) {
        return parseObject(file, readText(file));
    }

    /** A short name of a JSON value's kind for error messages, e.g. "a number". */
    static String describe(JsonNode node) {
        return switch (node.getNodeType()) {
            case ARRAY -> "an array";
            case OBJECT -> "an object";
            case STRING -> "a string";
            case NUMBER -> "a number";
            case BOOLEAN -> "a boolean";
            case NULL -> "null";
            default -> node.getNodeType().toString().toLowerCase(java.util.Locale.ROOT);
        };
    }

    private static String describe(JsonProcessingException e) {
        JsonLocation location = e.getLocation();
        String where = location == null
                ? ""
                : " (line " + location.getLineNr() + ", column " + location.getColumnNr() + ")";
        return e.getOriginalMessage() + where;
    }
}
