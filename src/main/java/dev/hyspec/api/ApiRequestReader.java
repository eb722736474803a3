package dev.hyspec.api;

import com.fasterxml.jackson.databind.JsonNode;
import dev.hyspec.tokenizer.ChatMessage;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * Reads OpenAI request bodies into {@link ApiRequest}s, following the OpenAI API and vLLM's
 * extensions; every wrong type or range is a 400 naming the field. Unknown fields are ignored, as
 * OpenAI SDKs send options this server does not use.
 */
final class ApiRequestReader {
    /** Most top logprobs per token (vLLM's default {@code max_logprobs}). */
    static final int MAX_LOGPROBS = 20;
    /** Most drafts a request may ask for. */
    static final int MAX_SPECULATIVE_TOKENS = 64;
    private static final Set<String> ROLES = Set.of("system", "developer", "user", "assistant", "tool");

    private ApiRequestReader() {}

    static ApiRequest completion(JsonNode body, int defaultSpecTokens) {
        RequestFields f = new RequestFields(body);
        JsonNode prompt = f.node("prompt");
        if (prompt == null) {
            throw ApiException.badRequest("prompt", "prompt is required: a string or an array of token ids");
        }
        int[] ids = null;
        String text = null;
        if (prompt.isArray() && prompt.size() == 1 && (prompt.get(0).isTextual() || prompt.get(0).isArray())) {
            prompt = prompt.get(0);   // a batch of one
        }
        if (prompt.isTextual()) {
            text = prompt.textValue();
        } else if (prompt.isArray()) {
            ids = new int[prompt.size()];
            for (int i = 0; i < ids.length; i++) {
                JsonNode t = prompt.get(i);
                if (t.isTextual() || t.isArray()) {
                    throw ApiException.badRequest("prompt", "one prompt per request: send several requests to batch");
                }
                if (!t.isIntegralNumber() || !t.canConvertToInt() || t.intValue() < 0) {
                    throw ApiException.badRequest("prompt", "prompt must be a string or an array of non-negative "
                            + "token ids; element " + i + " is " + t);
                }
                ids[i] = t.intValue();
            }
        } else {
            throw RequestFields.wrongType("prompt", "a string or an array of token ids", prompt);
        }
        if ((text != null && text.isEmpty()) || (ids != null && ids.length == 0)) {
            throw ApiException.badRequest("prompt", "the prompt is empty");
        }
        if (f.bool("echo", false)) {
            throw ApiException.badRequest("echo", "echo is not supported");
        }
        if (f.has("suffix")) {
            throw ApiException.badRequest("suffix", "suffix is not supported");
        }
        f.integer("best_of", 1, 1);   // one sequence per request
        Integer logprobs = f.integer("logprobs", 0, MAX_LOGPROBS);
        return common(f, false, ids, text, List.of(), f.integer("max_tokens", 1, Integer.MAX_VALUE),
                logprobs == null ? -1 : logprobs, defaultSpecTokens);
    }

    static ApiRequest chat(JsonNode body, int defaultSpecTokens) {
        RequestFields f = new RequestFields(body);
        JsonNode messages = f.node("messages");
        if (messages == null) {
            throw ApiException.badRequest("messages", "messages is required: an array of {role, content} objects");
        }
        if (!messages.isArray()) {
            throw RequestFields.wrongType("messages", "an array of {role, content} objects", messages);
        }
        if (messages.isEmpty()) {
            throw ApiException.badRequest("messages", "messages must hold at least one message");
        }
        List<ChatMessage> list = new ArrayList<>();
        for (int i = 0; i < messages.size(); i++) {
            list.add(message(messages.get(i), "messages[" + i + "]"));
        }
        Integer maxTokens = f.integer("max_completion_tokens", 1, Integer.MAX_VALUE);
        if (maxTokens == null) {
            maxTokens = f.integer("max_tokens", 1, Integer.MAX_VALUE);
        }
        int logprobs = -1;
        if (f.bool("logprobs", false)) {
            Integer top = f.integer("top_logprobs", 0, MAX_LOGPROBS);
            logprobs = top == null ? 0 : top;
        } else if (f.has("top_logprobs") && f.integer("top_logprobs", 0, MAX_LOGPROBS) > 0) {
            throw ApiException.badRequest("top_logprobs", "top_logprobs needs logprobs: true");
        }
        return common(f, true, null, null, list, maxTokens, logprobs, defaultSpecTokens);
    }

    private static ChatMessage message(JsonNode m, String path) {
        if (!m.isObject()) {
            throw RequestFields.wrongType(path, "an object with role and content", m);
        }
        JsonNode role = m.get("role");
        if (role == null || !role.isTextual() || !ROLES.contains(role.textValue())) {
            throw ApiException.badRequest(path + ".role", path + ".role must be one of " + ROLES + ", got " + role);
        }
        JsonNode content = m.get("content");
        String text;
        if (content == null || content.isNull()) {
            if (!role.textValue().equals("assistant")) {
                throw ApiException.badRequest(path + ".content", path + ".content is required");
            }
            text = "";
        } else if (content.isTextual()) {
            text = content.textValue();
        } else if (content.isArray()) {
            // content parts: only text parts can be served
            StringBuilder sb = new StringBuilder();
            for (JsonNode part : content) {
                JsonNode type = part.get("type");
                JsonNode partText = part.get("text");
                if (type == null || !"text".equals(type.asText()) || partText == null || !partText.isTextual()) {
                    throw ApiException.badRequest(path + ".content", path
                            + ".content parts must be {\"type\": \"text\", \"text\": ...}; this model reads text only");
                }
                sb.append(partText.textValue());
            }
            text = sb.toString();
        } else {
            throw RequestFields.wrongType(path + ".content", "a string or an array of text parts", content);
        }
        return new ChatMessage(role.textValue(), text);
    }

    private static ApiRequest common(RequestFields f, boolean chat, int[] ids, String text, List<ChatMessage> messages,
                                     Integer maxTokens, int logprobs, int defaultSpecTokens) {
        String model = f.string("model", null);
        f.integer("n", 1, 1);   // one choice per request
        double temperature = orDefault(f.number("temperature", 0, 2), 1.0);
        double topP = orDefault(f.number("top_p", 0, 1), 1.0);
        if (topP == 0) {
            throw ApiException.badRequest("top_p", "top_p must be in (0, 1], got 0");
        }
        Integer topK = f.integer("top_k", -1, Integer.MAX_VALUE);
        Long seed = f.longValue("seed");
        for (String penalty : List.of("presence_penalty", "frequency_penalty")) {
            Double p = f.number(penalty, -2, 2);
            if (p != null && p != 0) {
                throw ApiException.badRequest(penalty, penalty + " is not supported (only 0)");
            }
        }
        List<String> stop = f.stringOrStrings("stop", 4);
        List<Integer> stopTokenIds = f.integers("stop_token_ids", 0, Integer.MAX_VALUE);
        boolean stream = f.bool("stream", false);
        boolean includeUsage = false;
        JsonNode streamOptions = f.node("stream_options");
        if (streamOptions != null) {
            if (!streamOptions.isObject()) {
                throw RequestFields.wrongType("stream_options", "an object", streamOptions);
            }
            JsonNode iu = streamOptions.get("include_usage");
            if (iu != null && !iu.isNull()) {
                if (!iu.isBoolean()) {
                    throw RequestFields.wrongType("stream_options.include_usage", "a boolean", iu);
                }
                includeUsage = iu.booleanValue();
            }
        }
        boolean returnTokenIds = f.bool("return_token_ids", false);
        boolean ignoreEos = f.bool("ignore_eos", false);
        String strategy = f.string("rollback_strategy", null);
        Integer numDrafts = speculative(f.node("speculative"), defaultSpecTokens);
        return new ApiRequest(chat, model, ids, text, messages, maxTokens, temperature, topP,
                topK == null ? -1 : topK, seed, stop, stopTokenIds, logprobs, stream, includeUsage, returnTokenIds,
                ignoreEos, numDrafts, strategy);
    }

    /**
     * {@code {"method": "ngram"|"none", "num_tokens": K}} → drafts per step ({@code ngram} without
     * {@code num_tokens}: {@code defaultSpecTokens}), or null when absent (the server's default).
     */
    private static Integer speculative(JsonNode spec, int defaultSpecTokens) {
        if (spec == null) {
            return null;
        }
        if (!spec.isObject()) {
            throw RequestFields.wrongType("speculative", "an object {\"method\": \"ngram\"|\"none\", \"num_tokens\": K}",
                    spec);
        }
        JsonNode method = spec.get("method");
        String m = "ngram";
        if (method != null && !method.isNull()) {
            if (!method.isTextual() || !(method.textValue().equals("ngram") || method.textValue().equals("none"))) {
                throw ApiException.badRequest("speculative.method", "speculative.method must be \"ngram\" or \"none\", got "
                        + method);
            }
            m = method.textValue();
        }
        Integer k = RequestFields.integer(spec, "num_tokens", "speculative.num_tokens", 0, MAX_SPECULATIVE_TOKENS);
        if (m.equals("none")) {
            return 0;
        }
        return k == null ? defaultSpecTokens : k;
    }

    private static double orDefault(Double v, double fallback) {
        return v == null ? fallback : v;
    }
}
