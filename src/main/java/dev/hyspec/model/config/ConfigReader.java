package dev.hyspec.model.config;

import com.fasterxml.jackson.databind.JsonNode;
import dev.hyspec.checkpoint.CheckpointException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** Typed reads of {@code config.json} keys; every failure names the key and what was found. */
final class ConfigReader {
    private final JsonNode root;
    private final String file;

    ConfigReader(JsonNode root, String file) {
        this.root = root;
        this.file = file;
    }

    boolean has(String key) {
        JsonNode n = root.get(key);
        return n != null && !n.isNull();
    }

    JsonNode node(String key) {
        return root.get(key);
    }

    int integer(String key) {
        JsonNode n = required(key);
        if (!n.canConvertToInt() || !n.isIntegralNumber()) {
            throw bad(key, "an integer", n);
        }
        return n.intValue();
    }

    int integer(String key, int fallback) {
        return has(key) ? integer(key) : fallback;
    }

    double number(String key) {
        return number(required(key), key);
    }

    double number(String key, double fallback) {
        return has(key) ? number(key) : fallback;
    }

    boolean bool(String key, boolean fallback) {
        if (!has(key)) {
            return fallback;
        }
        JsonNode n = root.get(key);
        if (!n.isBoolean()) {
            throw bad(key, "true or false", n);
        }
        return n.booleanValue();
    }

    String string(String key, String fallback) {
        if (!has(key)) {
            return fallback;
        }
        JsonNode n = root.get(key);
        if (!n.isTextual()) {
            throw bad(key, "a string", n);
        }
        return n.textValue();
    }

    List<String> strings(String key) {
        JsonNode n = required(key);
        if (!n.isArray()) {
            throw bad(key, "a list of strings", n);
        }
        List<String> out = new ArrayList<>();
        for (JsonNode e : n) {
            if (!e.isTextual()) {
                throw bad(key, "a list of strings", n);
            }
            out.add(e.textValue());
        }
        return out;
    }

    List<Integer> integers(String key) {
        if (!has(key)) {
            return List.of();
        }
        JsonNode n = root.get(key);
        if (!n.isArray()) {
            throw bad(key, "a list of integers", n);
        }
        List<Integer> out = new ArrayList<>();
        for (JsonNode e : n) {
            if (!e.isIntegralNumber()) {
                throw bad(key, "a list of integers", n);
            }
            out.add(e.intValue());
        }
        return out;
    }

    /** A number that may also be written {@code {"__float__": "Infinity"}} (transformers 5.x). */
    double number(JsonNode n, String key) {
        if (n.isNumber()) {
            return n.doubleValue();
        }
        if (n.isObject() && n.has("__float__")) {
            String s = n.get("__float__").asText();
            switch (s) {
                case "Infinity", "inf": return Double.POSITIVE_INFINITY;
                case "-Infinity", "-inf": return Double.NEGATIVE_INFINITY;
                case "NaN", "nan": return Double.NaN;
                default:
                    try {
                        return Double.parseDouble(s);
                    } catch (NumberFormatException e) {
                        throw bad(key, "a number", n);
                    }
            }
        }
        throw bad(key, "a number", n);
    }

    /** The first token id of an {@code eos_token_id}-style key, which may be an int or a list. */
    Optional<Integer> tokenId(String key) {
        if (!has(key)) {
            return Optional.empty();
        }
        JsonNode n = root.get(key);
        if (n.isIntegralNumber()) {
            return Optional.of(n.intValue());
        }
        if (n.isArray() && n.size() > 0 && n.get(0).isIntegralNumber()) {
            return Optional.of(n.get(0).intValue());
        }
        throw bad(key, "a token id or a list of token ids", n);
    }

    List<Integer> tokenIds(String key) {
        if (!has(key)) {
            return List.of();
        }
        JsonNode n = root.get(key);
        if (n.isIntegralNumber()) {
            return List.of(n.intValue());
        }
        return integers(key);
    }

    private JsonNode required(String key) {
        JsonNode n = root.get(key);
        if (n == null || n.isNull()) {
            throw new CheckpointException("malformed " + file + ": key \"" + key + "\" is missing");
        }
        return n;
    }

    CheckpointException bad(String key, String expected, JsonNode found) {
        return new CheckpointException("malformed " + file + ": key \"" + key + "\" must be " + expected
                + ", found " + found);
    }
}
