package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.engine.Engine;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.http.ContentType;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * With one running and one waiting request allowed, a third gets 503 with {@code Retry-After} and
 * the first two are unharmed; draining (what shutdown does) turns readiness down, refuses new
 * requests with 503, and lets the running ones finish. Health: liveness and startup stay up.
 */
@QuarkusTest
@TestProfile(OverloadAndDrainTest.Small.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class OverloadAndDrainTest {
    /** One request at a time, one waiting. */
    public static class Small implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("hyspec.scheduler.max-num-seqs", "1", "hyspec.scheduler.max-waiting", "1");
        }
    }

    @Inject
    Engine engine;

    static final String LONG = "{\"prompt\": [5, 6, 7, 8], \"max_tokens\": 400, \"ignore_eos\": true, "
            + "\"temperature\": 0, \"stream\": true, \"return_token_ids\": true}";

    private void awaitInFlight(int n) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (engine.inFlight() < n && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(n, engine.inFlight());
    }

    private static int streamedTokens(String body) {
        int n = 0;
        for (var e : Sse.events(body)) {
            n += e.at("/choices/0/token_ids").size();
        }
        return n;
    }

    @Test
    @Order(1)
    void healthIsUpWhenIdle() {
        given().get("/q/health/live").then().statusCode(200).body("status", equalTo("UP"));
        given().get("/q/health/ready").then().statusCode(200).body("status", equalTo("UP"));
        given().get("/q/health/started").then().statusCode(200).body("status", equalTo("UP"));
    }

    @Test
    @Order(2)
    void aFullQueueAnswers503WithRetryAfterAndHarmsNoOne() throws Exception {
        String body = LONG;
        CompletableFuture<String> first = CompletableFuture.supplyAsync(
                () -> given().contentType(ContentType.JSON).body(body).post("/v1/completions").asString());
        awaitInFlight(1);
        CompletableFuture<String> second = CompletableFuture.supplyAsync(
                () -> given().contentType(ContentType.JSON).body(body).post("/v1/completions").asString());
        awaitInFlight(2);
        for (String path : List.of("/v1/completions", "/v1/chat/completions")) {
            String req = path.contains("chat")
                    ? "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 3}"
                    : "{\"prompt\": [1, 2], \"max_tokens\": 3}";
            given().contentType(ContentType.JSON).body(req).post(path).then().statusCode(503)
                    .header("Retry-After", "1")
                    .body("error.code", equalTo("overloaded"))
                    .body("error.type", equalTo("service_unavailable_error"));
        }
        assertEquals(400, streamedTokens(first.get()));
        assertEquals(400, streamedTokens(second.get()));
        Awaits.idle(engine);
        given().contentType(ContentType.JSON).body("{\"prompt\": [1, 2], \"max_tokens\": 3}").post("/v1/completions")
                .then().statusCode(200);
    }

    @Test
    @Order(3)
    void drainingRefusesNewWorkAndLetsRunningRequestsFinish() throws Exception {
        CompletableFuture<String> running = CompletableFuture.supplyAsync(
                () -> given().contentType(ContentType.JSON).body(LONG).post("/v1/completions").asString());
        awaitInFlight(1);
        CompletableFuture<Integer> drained = CompletableFuture.supplyAsync(() -> engine.drain(Duration.ofSeconds(60)));
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (!engine.draining() && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        given().get("/q/health/ready").then().statusCode(503).body("status", equalTo("DOWN"));
        given().get("/q/health/live").then().statusCode(200);
        given().contentType(ContentType.JSON).body("{\"prompt\": [1, 2], \"max_tokens\": 3}").post("/v1/completions")
                .then().statusCode(503).header("Retry-After", "5").body("error.code", equalTo("draining"));
        assertEquals(0, drained.get(), "everything finished within the drain timeout");
        assertTrue(running.get().endsWith("data: [DONE]\n\n"));
        assertEquals(400, streamedTokens(running.get()), "the running request finished whole");
    }
}
