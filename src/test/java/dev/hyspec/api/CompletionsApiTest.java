package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.engine.Engine;
import dev.hyspec.engine.ModelRegistry;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.tokenizer.Tokenizer;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.http.ContentType;
import io.restassured.response.Response;
import jakarta.inject.Inject;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code /v1/completions} and {@code /v1/chat/completions} over real HTTP, against references: greedy
 * output equals transformers' rollouts of the served checkpoint (hf-tiny nemotron_h), with and
 * without speculative decoding and for each rollback strategy; streaming and non-streaming agree
 * token for token; text is the tokenizer's decoding of the token ids; stop strings, stop token ids
 * and logprobs behave as in the OpenAI API / vLLM.
 */
@QuarkusTest
class CompletionsApiTest {
    @Inject
    Engine engine;

    @Inject
    ModelRegistry registry;

    static ObjectNode completion(int[] prompt, int maxTokens) {
        ObjectNode b = Sse.JSON.createObjectNode();
        ArrayNode p = b.putArray("prompt");
        for (int t : prompt) {
            p.add(t);
        }
        b.put("max_tokens", maxTokens);
        b.put("temperature", 0);
        b.put("ignore_eos", true);
        b.put("return_token_ids", true);
        return b;
    }

    static Response post(String path, Object body) {
        return given().contentType(ContentType.JSON).body(body.toString()).when().post(path);
    }

    static JsonNode ok(String path, Object body) {
        Response r = post(path, body);
        assertEquals(200, r.statusCode(), r.asString());
        try {
            return Sse.JSON.readTree(r.asString());
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    static int[] ids(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = array.get(i).intValue();
        }
        return out;
    }

    /** Token ids and text of a streamed response, from its chunks. */
    record Streamed(int[] tokenIds, String text, List<JsonNode> events) {}

    static Streamed stream(String path, ObjectNode body) {
        body.put("stream", true);
        Response r = post(path, body);
        assertEquals(200, r.statusCode(), r.asString());
        assertTrue(r.contentType().startsWith("text/event-stream"), r.contentType());
        List<JsonNode> events = Sse.events(r.asString());
        List<Integer> ids = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        for (JsonNode e : events) {
            for (JsonNode c : e.get("choices")) {
                if (c.has("token_ids")) {
                    c.get("token_ids").forEach(t -> ids.add(t.intValue()));
                }
                JsonNode piece = c.has("delta") ? c.get("delta").get("content") : c.get("text");
                if (piece != null && !piece.isNull()) {
                    text.append(piece.textValue());
                }
            }
        }
        return new Streamed(ids.stream().mapToInt(Integer::intValue).toArray(), text.toString(), events);
    }

    private Fixtures.Fixture reference() {
        return Fixtures.named("nemotron_h");
    }

    @Test
    void greedyOutputEqualsTheTransformersRolloutsForEveryStrategyWithAndWithoutDrafts() {
        Fixtures.Fixture f = reference();
        for (int i = 0; i < f.prompts().size(); i++) {
            int[] expected = f.greedy().get(i);
            for (String strategy : List.of("replay", "intermediate-copy")) {
                for (String method : List.of("none", "ngram")) {
                    ObjectNode body = completion(f.prompts().get(i), expected.length);
                    body.put("rollback_strategy", strategy);
                    body.putObject("speculative").put("method", method).put("num_tokens", 3);
                    JsonNode res = ok("/v1/completions", body);
                    String what = "prompt " + i + " / " + strategy + " / " + method;
                    assertArrayEquals(expected, ids(res.at("/choices/0/token_ids")), what);
                    assertArrayEquals(f.prompts().get(i), ids(res.at("/choices/0/prompt_token_ids")), what);
                    assertEquals("length", res.at("/choices/0/finish_reason").textValue(), what);
                    assertEquals(strategy, res.at("/hyspec/rollback_strategy").textValue(), what);
                    assertEquals(expected.length, res.at("/usage/completion_tokens").intValue());
                    assertEquals(f.prompts().get(i).length, res.at("/usage/prompt_tokens").intValue());
                    if (method.equals("none")) {
                        assertEquals(0, res.at("/hyspec/draft_tokens").intValue(), what);
                    }
                    Streamed s = stream("/v1/completions", body);
                    assertArrayEquals(expected, s.tokenIds(), what + " (streamed)");
                }
            }
        }
    }

    @Test
    void streamingFramesChunksThenUsageThenDone() {
        ObjectNode body = completion(new int[] {5, 6, 7, 8, 5, 6, 7, 8, 5, 6}, 12);
        body.putObject("stream_options").put("include_usage", true);
        Streamed s = stream("/v1/completions", body);
        List<JsonNode> events = s.events();
        assertTrue(events.size() >= 3, "several chunks");
        JsonNode usage = events.get(events.size() - 1);
        assertEquals(0, usage.get("choices").size(), "the usage chunk has no choices");
        assertEquals(12, usage.at("/usage/completion_tokens").intValue());
        assertEquals(10, usage.at("/usage/prompt_tokens").intValue());
        assertEquals(22, usage.at("/usage/total_tokens").intValue());
        JsonNode last = events.get(events.size() - 2);
        assertEquals("length", last.at("/choices/0/finish_reason").textValue());
        assertNotNull(last.get("hyspec"));
        String id = events.get(0).get("id").textValue();
        for (JsonNode e : events) {
            assertEquals("text_completion", e.get("object").textValue());
            assertEquals(id, e.get("id").textValue(), "one id for the whole stream");
            assertEquals("nemotron_h_chat", e.get("model").textValue());
            if (e != usage) {
                assertTrue(e.get("usage").isNull(), "usage is null on choice chunks when include_usage is set");
            }
        }
        assertEquals(12, s.tokenIds().length);
        for (int i = 0; i < events.size() - 2; i++) {
            assertTrue(events.get(i).at("/choices/0/finish_reason").isNull());
        }
    }

    @Test
    void textPromptsAreTokenizedAndOutputTextIsTheDecodingOfTheTokenIds() {
        Tokenizer tok = registry.model().orElseThrow().tokenizer().orElseThrow();
        ObjectNode body = Sse.JSON.createObjectNode();
        body.put("prompt", "The quick brown fox");
        body.put("max_tokens", 20);
        body.put("temperature", 0);
        body.put("ignore_eos", true);
        body.put("return_token_ids", true);
        JsonNode res = ok("/v1/completions", body);
        assertArrayEquals(tok.encode("The quick brown fox"), ids(res.at("/choices/0/prompt_token_ids")));
        int[] out = ids(res.at("/choices/0/token_ids"));
        assertEquals(20, out.length);
        assertEquals(tok.decode(out, true), res.at("/choices/0/text").textValue());
        Streamed s = stream("/v1/completions", body);
        assertArrayEquals(out, s.tokenIds());
        assertEquals(res.at("/choices/0/text").textValue(), s.text());
    }

    @Test
    void chatRendersTheCheckpointsTemplate() {
        Tokenizer tok = registry.model().orElseThrow().tokenizer().orElseThrow();
        ObjectNode body = Sse.JSON.createObjectNode();
        ArrayNode messages = body.putArray("messages");
        messages.addObject().put("role", "system").put("content", "Be brief.");
        messages.addObject().put("role", "user").put("content", "Hello world");
        body.put("max_tokens", 10);
        body.put("temperature", 0);
        body.put("ignore_eos", true);
        body.put("return_token_ids", true);
        JsonNode res = ok("/v1/chat/completions", body);
        assertEquals("chat.completion", res.get("object").textValue());
        assertEquals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello world<|im_end|>\n"
                + "<|im_start|>assistant\n", tok.decode(ids(res.get("prompt_token_ids"))));
        assertEquals("assistant", res.at("/choices/0/message/role").textValue());
        int[] out = ids(res.at("/choices/0/token_ids"));
        assertEquals(tok.decode(out, true), res.at("/choices/0/message/content").textValue());
        Streamed s = stream("/v1/chat/completions", body);
        assertEquals("assistant", s.events().get(0).at("/choices/0/delta/role").textValue());
        assertEquals("chat.completion.chunk", s.events().get(0).get("object").textValue());
        assertArrayEquals(out, s.tokenIds());
        assertEquals(res.at("/choices/0/message/content").textValue(), s.text());
    }

    @Test
    void stopStringsCutTheTextBeforeTheStopStringStreamingOrNot() {
        ObjectNode body = Sse.JSON.createObjectNode();
        body.put("prompt", "Once upon a time");
        body.put("max_tokens", 40);
        body.put("temperature", 0);
        body.put("ignore_eos", true);
        String full = ok("/v1/completions", body).at("/choices/0/text").textValue();
        assertTrue(full.length() > 12, full);
        // a stop string that first occurs in the middle of the text
        String stop = full.substring(8, 11);
        String expected = full.substring(0, full.indexOf(stop));
        body.putArray("stop").add(stop).add("\u0000never");
        JsonNode res = ok("/v1/completions", body);
        assertEquals(expected, res.at("/choices/0/text").textValue());
        assertEquals("stop", res.at("/choices/0/finish_reason").textValue());
        assertEquals(stop, res.at("/choices/0/stop_reason").textValue());
        Streamed s = stream("/v1/completions", body);
        assertEquals(expected, s.text());
        JsonNode last = s.events().get(s.events().size() - 1);
        assertEquals("stop", last.at("/choices/0/finish_reason").textValue());
        assertEquals(stop, last.at("/choices/0/stop_reason").textValue());
        Awaits.idle(engine);
    }

    @Test
    void stopTokenIdsEndTheOutputWithTheStopToken() {
        int[] prompt = {9, 10, 11, 12};
        int[] full = ids(ok("/v1/completions", completion(prompt, 30)).at("/choices/0/token_ids"));
        int stopId = full[6];
        int first = 0;
        while (full[first] != stopId) {
            first++;
        }
        ObjectNode body = completion(prompt, 30);
        body.putArray("stop_token_ids").add(stopId);
        JsonNode res = ok("/v1/completions", body);
        int[] out = ids(res.at("/choices/0/token_ids"));
        assertArrayEquals(java.util.Arrays.copyOf(full, first + 1), out);
        assertEquals("stop", res.at("/choices/0/finish_reason").textValue());
        assertEquals(stopId, res.at("/choices/0/stop_reason").intValue());
    }

    @Test
    void logprobsFollowTheOpenAiShapes() {
        ObjectNode body = completion(new int[] {20, 21, 22}, 6);
        body.put("logprobs", 2);
        JsonNode lp = ok("/v1/completions", body).at("/choices/0/logprobs");
        assertEquals(6, lp.get("tokens").size());
        assertEquals(6, lp.get("token_logprobs").size());
        assertEquals(6, lp.get("text_offset").size());
        for (int i = 0; i < 6; i++) {
            double l = lp.get("token_logprobs").get(i).doubleValue();
            assertTrue(l <= 0, "a log-probability");
            JsonNode top = lp.get("top_logprobs").get(i);
            assertTrue(top.size() >= 1 && top.size() <= 2);
            // greedy: the chosen token is the most likely one (the dict is keyed by text, and byte
            // tokens of a split UTF-8 character share the text "\uFFFD", so compare with every entry)
            for (var it = top.fields(); it.hasNext(); ) {
                assertTrue(l >= it.next().getValue().doubleValue() - 1e-6);
            }
        }
        ObjectNode chat = Sse.JSON.createObjectNode();
        chat.putArray("messages").addObject().put("role", "user").put("content", "hi");
        chat.put("max_tokens", 4);
        chat.put("temperature", 0);
        chat.put("ignore_eos", true);
        chat.put("logprobs", true);
        chat.put("top_logprobs", 3);
        JsonNode content = ok("/v1/chat/completions", chat).at("/choices/0/logprobs/content");
        assertEquals(4, content.size());
        for (JsonNode c : content) {
            assertEquals(3, c.get("top_logprobs").size());
            assertEquals(c.get("logprob").doubleValue(), c.at("/top_logprobs/0/logprob").doubleValue(), 1e-6);
            assertTrue(c.get("bytes").isArray());
        }
        Streamed s = stream("/v1/chat/completions", chat);
        int n = 0;
        for (JsonNode e : s.events()) {
            JsonNode l = e.at("/choices/0/logprobs/content");
            n += l.isMissingNode() ? 0 : l.size();
        }
        assertEquals(4, n, "streamed chunks carry their tokens' logprobs");
    }

    @Test
    void modelIsOptionalAndChecked() {
        ObjectNode body = completion(new int[] {1, 2, 3}, 2);
        body.put("model", "nemotron_h_chat");
        ok("/v1/completions", body);
        body.put("model", "gpt-4");
        post("/v1/completions", body).then().statusCode(400)
                .body("error.param", equalTo("model"))
                .body("error.code", equalTo("model_not_found"))
                .body("error.type", equalTo("invalid_request_error"));
        assertFalse(engine.draining());
    }
}
