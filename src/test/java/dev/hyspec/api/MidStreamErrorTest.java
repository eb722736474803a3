package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.hyspec.engine.Engine;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.http.ContentType;
import jakarta.inject.Inject;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * An engine failure in the middle of a request: streaming, the client gets the chunks so far, then
 * an error event, then {@code [DONE]}; non-streaming, a 500 error object. A request running beside
 * it is unharmed and nothing leaks.
 */
@QuarkusTest
@TestProfile(MidStreamErrorTest.WithFailingStrategy.class)
class MidStreamErrorTest {
    /** Adds {@link FailingStrategy}; prefix caching off so that every token is computed here. */
    public static class WithFailingStrategy implements QuarkusTestProfile {
        @Override
        public java.util.Map<String, String> getConfigOverrides() {
            return java.util.Map.of("hyspec-test.failing-strategy", "true", "hyspec.prefix-cache.enabled", "false");
        }
    }

    @Inject
    Engine engine;

    private static String body(String strategy, boolean stream) {
        return "{\"prompt\": [5, 6, 7, 8], \"max_tokens\": 60, \"temperature\": 0, \"ignore_eos\": true, "
                + "\"return_token_ids\": true, \"stream\": " + stream + ", \"rollback_strategy\": \"" + strategy + "\"}";
    }

    @Test
    void aFailureMidStreamEndsWithAnErrorEventThenDone() throws Exception {
        CompletableFuture<String> healthy = CompletableFuture.supplyAsync(() -> given().contentType(ContentType.JSON)
                .body(body("replay", true)).post("/v1/completions").asString());
        String failing = given().contentType(ContentType.JSON).body(body(FailingStrategy.ID, true))
                .post("/v1/completions").then().statusCode(200).extract().asString();
        List<JsonNode> events = Sse.events(failing);
        JsonNode last = events.get(events.size() - 1);
        assertTrue(last.has("error"), "the last event is an error: " + last);
        assertEquals("server_error", last.at("/error/type").textValue());
        assertTrue(last.at("/error/message").textValue().contains("injected failure"));
        int tokens = 0;
        for (JsonNode e : events.subList(0, events.size() - 1)) {
            tokens += e.at("/choices/0/token_ids").size();
        }
        assertTrue(tokens >= 1 && tokens < 60, "some tokens came before the failure: " + tokens);

        List<JsonNode> ok = Sse.events(healthy.get());
        int healthyTokens = 0;
        for (JsonNode e : ok) {
            healthyTokens += e.at("/choices/0/token_ids").size();
        }
        assertEquals(60, healthyTokens, "the request beside it finished whole");
        Awaits.idle(engine);
    }

    @Test
    void aFailureWithoutStreamingIsA500ErrorObject() {
        given().contentType(ContentType.JSON).body(body(FailingStrategy.ID, false)).post("/v1/completions").then()
                .statusCode(500).body("error.type", equalTo("server_error"))
                .body("error.message", startsWith("engine failure"));
        Awaits.idle(engine);
    }
}
