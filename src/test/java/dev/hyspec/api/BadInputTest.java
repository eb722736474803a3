package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.notNullValue;
import static org.hamcrest.Matchers.nullValue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.engine.Engine;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.http.ContentType;
import io.restassured.response.ValidatableResponse;
import jakarta.inject.Inject;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * Bad input gets a 400 with an OpenAI error object naming the field, and harms nothing else: a
 * request streaming meanwhile finishes with the right output, and no slot or page leaks.
 */
@QuarkusTest
class BadInputTest {
    @Inject
    Engine engine;

    /** One bad request: where it goes, its body, the field the error must name (null: none). */
    record Case(String path, String body, String param) {}

    static final String C = "/v1/completions";
    static final String CHAT = "/v1/chat/completions";

    static final List<Case> CASES = List.of(
            new Case(C, "{\"prompt\": [1, 2,", null),                                  // invalid JSON
            new Case(C, "[1, 2, 3]", null),                                             // not an object
            new Case(C, "{\"max_tokens\": 5}", "prompt"),                               // missing prompt
            new Case(C, "{\"prompt\": 5}", "prompt"),                                   // wrong type
            new Case(C, "{\"prompt\": \"\"}", "prompt"),                                // empty
            new Case(C, "{\"prompt\": []}", "prompt"),
            new Case(C, "{\"prompt\": [1, -4]}", "prompt"),                             // negative id
            new Case(C, "{\"prompt\": [1, 99999]}", "prompt"),                          // outside the vocabulary
            new Case(C, "{\"prompt\": [1, 2.5]}", "prompt"),
            new Case(C, "{\"prompt\": [[1, 2], [3]]}", "prompt"),                       // a batch
            new Case(C, "{\"prompt\": [1, 2], \"max_tokens\": -1}", "max_tokens"),
            new Case(C, "{\"prompt\": [1, 2], \"max_tokens\": 0}", "max_tokens"),
            new Case(C, "{\"prompt\": [1, 2], \"max_tokens\": \"10\"}", "max_tokens"),
            new Case(C, "{\"prompt\": [1, 2], \"max_tokens\": 10.5}", "max_tokens"),
            new Case(C, "{\"prompt\": [1, 2], \"max_tokens\": 1000000000}", "max_tokens"),   // beyond the context
            new Case(C, "{\"prompt\": [1, 2], \"max_tokens\": 100000000000000}", "max_tokens"),
            new Case(C, "{\"prompt\": " + longPrompt(5000) + "}", "prompt"),           // longer than the context
            new Case(C, "{\"prompt\": [1, 2], \"model\": \"gpt-4o\"}", "model"),
            new Case(C, "{\"prompt\": [1, 2], \"model\": 7}", "model"),
            new Case(C, "{\"prompt\": [1, 2], \"temperature\": \"hot\"}", "temperature"),
            new Case(C, "{\"prompt\": [1, 2], \"temperature\": -1}", "temperature"),
            new Case(C, "{\"prompt\": [1, 2], \"top_p\": 0}", "top_p"),
            new Case(C, "{\"prompt\": [1, 2], \"top_k\": -5}", "top_k"),
            new Case(C, "{\"prompt\": [1, 2], \"seed\": \"x\"}", "seed"),
            new Case(C, "{\"prompt\": [1, 2], \"stream\": \"yes\"}", "stream"),
            new Case(C, "{\"prompt\": [1, 2], \"stop\": 5}", "stop"),
            new Case(C, "{\"prompt\": [1, 2], \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "stop"),
            new Case(C, "{\"prompt\": [1, 2], \"logprobs\": 21}", "logprobs"),
            new Case(C, "{\"prompt\": [1, 2], \"n\": 2}", "n"),
            new Case(C, "{\"prompt\": [1, 2], \"echo\": true}", "echo"),
            new Case(C, "{\"prompt\": [1, 2], \"stream_options\": {\"include_usage\": 1}}", "stream_options.include_usage"),
            new Case(C, "{\"prompt\": [1, 2], \"rollback_strategy\": \"checkpoint\"}", "rollback_strategy"),
            new Case(C, "{\"prompt\": [1, 2], \"rollback_strategy\": 3}", "rollback_strategy"),
            new Case(C, "{\"prompt\": [1, 2], \"speculative\": {\"method\": \"eagle\"}}", "speculative.method"),
            new Case(C, "{\"prompt\": [1, 2], \"speculative\": {\"num_tokens\": -1}}", "speculative.num_tokens"),
            new Case(C, "{\"prompt\": [1, 2], \"speculative\": {\"num_tokens\": 65}}", "speculative.num_tokens"),
            new Case(C, "{\"prompt\": [1, 2], \"speculative\": \"ngram\"}", "speculative"),
            new Case(C, "{\"prompt\": [1, 2], \"presence_penalty\": 0.5}", "presence_penalty"),
            new Case(CHAT, "{\"messages\": []}", "messages"),
            new Case(CHAT, "{}", "messages"),
            new Case(CHAT, "{\"messages\": \"hi\"}", "messages"),
            new Case(CHAT, "{\"messages\": [{\"role\": \"robot\", \"content\": \"hi\"}]}", "messages[0].role"),
            new Case(CHAT, "{\"messages\": [{\"role\": \"user\"}]}", "messages[0].content"),
            new Case(CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages[0].content"),
            new Case(CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
                    "messages[0].content"),
            new Case(CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_completion_tokens\": 0}",
                    "max_completion_tokens"),
            new Case(CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"top_logprobs\": 2}",
                    "top_logprobs"));

    static String longPrompt(int n) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < n; i++) {
            sb.append(i > 0 ? "," : "").append(3 + i % 400);
        }
        return sb.append("]").toString();
    }

    @Test
    void everyBadInputIsA400NamingTheFieldAndHarmsNothingElse() throws Exception {
        // a request streams while the bad ones come in
        CompletableFuture<String> running = CompletableFuture.supplyAsync(() -> given().contentType(ContentType.JSON)
                .body("{\"prompt\": [5, 6, 7, 5, 6, 7], \"max_tokens\": 200, \"temperature\": 0, \"ignore_eos\": true,"
                        + " \"stream\": true, \"return_token_ids\": true}")
                .post(C).asString());
        for (Case c : CASES) {
            for (boolean stream : new boolean[] {false, true}) {
                String body = c.body();
                if (stream && body.contains("\"stream")) {
                    continue;   // the case is about the stream fields themselves
                }
                if (stream && body.startsWith("{") && body.endsWith("}") && body.length() > 2) {
                    body = body.substring(0, body.length() - 1) + ", \"stream\": true}";
                }
                var response = given().contentType(ContentType.JSON).body(body).post(c.path());
                assertEquals(400, response.statusCode(), body + " -> " + response.asString());
                ValidatableResponse r = response.then().contentType(ContentType.JSON)
                        .body("error.type", equalTo("invalid_request_error"))
                        .body("error.message", notNullValue());
                if (c.param() == null) {
                    r.body("error.param", nullValue());
                } else {
                    r.body("error.param", equalTo(c.param()));
                }
            }
        }
        String streamed = running.get();
        List<com.fasterxml.jackson.databind.JsonNode> events = Sse.events(streamed);
        int tokens = 0;
        for (var e : events) {
            tokens += e.at("/choices/0/token_ids").size();
        }
        assertEquals(200, tokens, "the request streaming meanwhile got all its tokens");
        assertTrue(events.get(events.size() - 1).at("/choices/0/finish_reason").asText().equals("length"));
        Awaits.idle(engine);
    }

    @Test
    void unknownPathsAndMethodsAreNotServed() {
        given().get(C).then().statusCode(405);
        given().contentType(ContentType.JSON).body("{}").post("/v1/embeddings").then().statusCode(404);
    }
}
