package dev.hyspec.api;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.engine.RequestStats;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The OpenAI response objects: whole responses, streaming chunks and error objects, for text
 * completions ({@code text_completion}) and chat ({@code chat.completion} / {@code chat.completion.chunk}),
 * with vLLM's {@code token_ids} / {@code prompt_token_ids} and hyspec's {@code hyspec} stats object.
 */
final class ResponseBodies {
    private final ObjectMapper json;
    private final GenerationService.Prepared p;
    private final long created = System.currentTimeMillis() / 1000;
    private int textOffset;

    ResponseBodies(ObjectMapper json, GenerationService.Prepared p) {
        this.json = json;
        this.p = p;
    }

    private boolean chat() {
        return p.api().chat();
    }

    private ObjectNode envelope(boolean chunk) {
        ObjectNode o = json.createObjectNode();
        o.put("id", p.id());
        o.put("object", chat() ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
        o.put("created", created);
        o.put("model", p.model().id());
        return o;
    }

    /** The whole (non-streaming) response. */
    ObjectNode whole(String text, int[] tokenIds, List<Delta.Logprob> logprobs, Delta last) {
        ObjectNode o = envelope(false);
        ObjectNode choice = o.putArray("choices").addObject();
        choice.put("index", 0);
        if (chat()) {
            ObjectNode message = choice.putObject("message");
            message.put("role", "assistant");
            message.put("content", text);
        } else {
            choice.put("text", text);
        }
        putLogprobs(choice, logprobs);
        choice.put("finish_reason", last.finishReason());
        putStopReason(choice, last.stopReason());
        if (p.api().returnTokenIds()) {
            putIds(chat() ? o : choice, "prompt_token_ids", p.promptIds());
            putIds(choice, "token_ids", tokenIds);
        }
        o.set("usage", usage(tokenIds.length, last.stats()));
        putStats(o, last.stats());
        return o;
    }

    /** The first chunk: chat announces the assistant role; prompt token ids go here when asked for. */
    ObjectNode first() {
        ObjectNode o = envelope(true);
        ObjectNode choice = o.putArray("choices").addObject();
        choice.put("index", 0);
        if (chat()) {
            choice.putObject("delta").put("role", "assistant").put("content", "");
        } else {
            choice.put("text", "");
        }
        choice.putNull("logprobs");
        choice.putNull("finish_reason");
        if (p.api().returnTokenIds()) {
            putIds(chat() ? o : choice, "prompt_token_ids", p.promptIds());
            putIds(choice, "token_ids", new int[0]);
        }
        nullUsage(o);
        return o;
    }

    /** A chunk with new text, its token ids, and on the last one the finish reason and stats. */
    ObjectNode chunk(Delta d) {
        ObjectNode o = envelope(true);
        ObjectNode choice = o.putArray("choices").addObject();
        choice.put("index", 0);
        if (chat()) {
            ObjectNode delta = choice.putObject("delta");
            if (!d.text().isEmpty() || !d.last()) {
                delta.put("content", d.text());
            }
        } else {
            choice.put("text", d.text());
        }
        putLogprobs(choice, d.logprobs());
        if (d.last()) {
            choice.put("finish_reason", d.finishReason());
            putStopReason(choice, d.stopReason());
        } else {
            choice.putNull("finish_reason");
        }
        if (p.api().returnTokenIds()) {
            putIds(choice, "token_ids", d.tokenIds());
        }
        nullUsage(o);
        if (d.last()) {
            putStats(o, d.stats());
        }
        return o;
    }

    /** The last chunk when {@code stream_options.include_usage}: no choices, the usage. */
    ObjectNode usageChunk(int completionTokens, RequestStats stats) {
        ObjectNode o = envelope(true);
        o.putArray("choices");
        o.set("usage", usage(completionTokens, stats));
        return o;
    }

    /** The OpenAI error object. */
    static ObjectNode error(ObjectMapper json, ApiException e) {
        ObjectNode o = json.createObjectNode();
        ObjectNode err = o.putObject("error");
        err.put("message", e.getMessage());
        err.put("type", e.type());
        if (e.param() == null) {
            err.putNull("param");
        } else {
            err.put("param", e.param());
        }
        if (e.code() == null) {
            err.putNull("code");
        } else {
            err.put("code", e.code());
        }
        return o;
    }

    private void nullUsage(ObjectNode o) {
        if (p.api().includeUsage()) {
            o.putNull("usage");
        }
    }

    private ObjectNode usage(int completionTokens, RequestStats stats) {
        ObjectNode u = json.createObjectNode();
        u.put("prompt_tokens", p.promptIds().length);
        u.put("completion_tokens", completionTokens);
        u.put("total_tokens", p.promptIds().length + completionTokens);
        u.putObject("prompt_tokens_details").put("cached_tokens", stats == null ? 0 : stats.cachedPromptTokens());
        return u;
    }

    private static void putStats(ObjectNode o, RequestStats s) {
        if (s == null) {
            return;
        }
        ObjectNode h = o.putObject("hyspec");
        h.put("rollback_strategy", s.strategy());
        h.put("draft_tokens", s.draftTokens());
        h.put("accepted_tokens", s.acceptedDraftTokens());
        h.put("acceptance_rate", s.acceptanceRate());
        h.put("cached_prompt_tokens", s.cachedPromptTokens());
    }

    private static void putStopReason(ObjectNode choice, Object stopReason) {
        if (stopReason instanceof Integer i) {
            choice.put("stop_reason", i);
        } else if (stopReason != null) {
            choice.put("stop_reason", stopReason.toString());
        } else {
            choice.putNull("stop_reason");
        }
    }

    private static void putIds(ObjectNode o, String name, int[] ids) {
        ArrayNode a = o.putArray(name);
        for (int t : ids) {
            a.add(t);
        }
    }

    private void putLogprobs(ObjectNode choice, List<Delta.Logprob> logprobs) {
        if (logprobs == null) {
            choice.putNull("logprobs");
            return;
        }
        ObjectNode lp = choice.putObject("logprobs");
        if (chat()) {
            ArrayNode content = lp.putArray("content");
            for (Delta.Logprob l : logprobs) {
                ObjectNode e = content.addObject();
                e.put("token", l.token());
                e.put("logprob", l.logprob());
                putBytes(e, l.token());
                ArrayNode top = e.putArray("top_logprobs");
                for (Delta.Top t : l.top()) {
                    ObjectNode te = top.addObject();
                    te.put("token", t.token());
                    te.put("logprob", t.logprob());
                    putBytes(te, t.token());
                }
            }
        } else {
            ArrayNode tokens = lp.putArray("tokens");
            ArrayNode tokenLogprobs = lp.putArray("token_logprobs");
            ArrayNode top = lp.putArray("top_logprobs");
            ArrayNode offsets = lp.putArray("text_offset");
            for (Delta.Logprob l : logprobs) {
                tokens.add(l.token());
                tokenLogprobs.add(l.logprob());
                ObjectNode t = top.addObject();
                for (Delta.Top alt : l.top()) {
                    t.put(alt.token(), alt.logprob());
                }
                offsets.add(textOffset);
                textOffset += l.token().length();
            }
        }
    }

    private static void putBytes(ObjectNode e, String token) {
        ArrayNode bytes = e.putArray("bytes");
        for (byte b : token.getBytes(StandardCharsets.UTF_8)) {
            bytes.add(b & 0xFF);
        }
    }
}
