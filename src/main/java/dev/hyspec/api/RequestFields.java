package dev.hyspec.api;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * Typed reads of an OpenAI request body's fields, each refusing a wrong type or range with a 400
 * that names the field. {@code null} and a missing field read the same (OpenAI SDKs send explicit
 * nulls for unset options).
 */
final class RequestFields {
    private final JsonNode body;

    RequestFields(JsonNode body) {
        if (body == null || !body.isObject()) {
            throw ApiException.badRequest(null, "the request body must be a JSON object");
        }
        this.body = body;
    }

    boolean has(String name) {
        JsonNode n = body.get(name);
        return n != null && !n.isNull();
    }

    JsonNode node(String name) {
        JsonNode n = body.get(name);
        return n == null || n.isNull() ? null : n;
    }

    String string(String name, String fallback) {
        JsonNode n = node(name);
        if (n == null) {
            return fallback;
        }
        if (!n.isTextual()) {
            throw wrongType(name, "a string", n);
        }
        return n.textValue();
    }

    boolean bool(String name, boolean fallback) {
        JsonNode n = node(name);
        if (n == null) {
            return fallback;
        }
        if (!n.isBoolean()) {
            throw wrongType(name, "a boolean", n);
        }
        return n.booleanValue();
    }

    /** An integer in {@code [min, max]}; a float with an integral value (e.g. {@code 16.0}) is refused too. */
    Integer integer(String name, long min, long max) {
        return integer(body, name, name, min, max);
    }

    static Integer integer(JsonNode parent, String name, String path, long min, long max) {
        JsonNode n = parent.get(name);
        if (n == null || n.isNull()) {
            return null;
        }
        if (!n.isIntegralNumber()) {
            throw wrongType(path, "an integer", n);
        }
        if (!n.canConvertToLong() || n.longValue() < min || n.longValue() > max) {
            throw ApiException.badRequest(path, path + " must be an integer in [" + min + ", " + max + "], got "
                    + n.asText());
        }
        return (int) n.longValue();
    }

    Long longValue(String name) {
        JsonNode n = node(name);
        if (n == null) {
            return null;
        }
        if (!n.isIntegralNumber() || !n.canConvertToLong()) {
            throw wrongType(name, "an integer that fits 64 bits", n);
        }
        return n.longValue();
    }

    Double number(String name, double min, double max) {
        JsonNode n = node(name);
        if (n == null) {
            return null;
        }
        if (!n.isNumber()) {
            throw wrongType(name, "a number", n);
        }
        double v = n.doubleValue();
        if (!(v >= min && v <= max)) {
            throw ApiException.badRequest(name, name + " must be in [" + min + ", " + max + "], got " + n.asText());
        }
        return v;
    }

    /** A string or an array of strings (OpenAI's {@code stop}), at most {@code maxItems}. */
    List<String> stringOrStrings(String name, int maxItems) {
        JsonNode n = node(name);
        List<String> out = new ArrayList<>();
        if (n == null) {
            return out;
        }
        if (n.isTextual()) {
            out.add(n.textValue());
        } else if (n.isArray()) {
            for (JsonNode e : n) {
                if (!e.isTextual()) {
                    throw wrongType(name, "a string or an array of strings", n);
                }
                out.add(e.textValue());
            }
        } else {
            throw wrongType(name, "a string or an array of strings", n);
        }
        if (out.size() > maxItems) {
            throw ApiException.badRequest(name, name + " takes at most " + maxItems + " sequences, got " + out.size());
        }
        if (out.stream().anyMatch(String::isEmpty)) {
            throw ApiException.badRequest(name, name + " sequences must not be empty");
        }
        return out;
    }

    /** An array of integers in {@code [min, max]}. */
    List<Integer> integers(String name, long min, long max) {
        JsonNode n = node(name);
        List<Integer> out = new ArrayList<>();
        if (n == null) {
            return out;
        }
        if (!n.isArray()) {
            throw wrongType(name, "an array of integers", n);
        }
        for (JsonNode e : n) {
            if (!e.isIntegralNumber() || !e.canConvertToLong() || e.longValue() < min || e.longValue() > max) {
                throw ApiException.badRequest(name, name + " must hold integers in [" + min + ", " + max + "], got "
                        + e.toString());
            }
            out.add((int) e.longValue());
        }
        return out;
    }

    static ApiException wrongType(String name, String expected, JsonNode got) {
        return ApiException.badRequest(name, name + " must be " + expected + ", got " + describe(got));
    }

    private static String describe(JsonNode n) {
        String kind = switch (n.getNodeType()) {
            case STRING -> "a string";
            case NUMBER -> "a number";
            case BOOLEAN -> "a boolean";
            case ARRAY -> "an array";
            case OBJECT -> "an object";
            default -> n.getNodeType().name().toLowerCase();
        };
        String text = n.toString();
        return kind + " (" + (text.length() > 40 ? text.substring(0, 40) + "…" : text) + ")";
    }
}
