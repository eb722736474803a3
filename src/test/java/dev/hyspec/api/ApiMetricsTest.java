package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.engine.Engine;
import dev.hyspec.metrics.Exposition;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.http.ContentType;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

/**
 * Requests through the HTTP API move the request meters: outcome by finish reason and strategy,
 * time to first token, inter-token latency, end-to-end latency, token counts; refusals and hang-ups
 * are counted too.
 */
@QuarkusTest
class ApiMetricsTest {
    @Inject
    Engine engine;

    private static void complete(String strategy, int maxTokens, boolean stream) {
        given().contentType(ContentType.JSON).body("{\"prompt\": [5, 6, 7, 5, 6, 7], \"max_tokens\": " + maxTokens
                + ", \"temperature\": 0, \"ignore_eos\": true, \"stream\": " + stream + ", \"rollback_strategy\": \""
                + strategy + "\"}").post("/v1/completions").then().statusCode(200);
    }

    @Test
    void requestMetersMoveWithTraffic() {
        Exposition before = Exposition.scrape();
        complete("replay", 10, false);
        complete("replay", 10, true);
        complete("intermediate-copy", 7, true);
        given().contentType(ContentType.JSON).body("{\"prompt\": 3}").post("/v1/completions").then().statusCode(400);
        try (RawHttp http = new RawHttp("/v1/completions", "{\"prompt\": [5, 6, 7], \"max_tokens\": 3000, "
                + "\"ignore_eos\": true, \"stream\": true, \"rollback_strategy\": \"replay\"}")) {
            http.readEvents(2);
        }
        Awaits.idle(engine);
        Exposition after = Exposition.scrape();

        assertEquals(2, delta(before, after, "hyspec_requests_total", "strategy", "replay", "outcome", "length"));
        assertEquals(1, delta(before, after, "hyspec_requests_total", "strategy", "intermediate-copy", "outcome", "length"));
        assertEquals(1, delta(before, after, "hyspec_requests_total", "outcome", "rejected"));
        assertEquals(1, delta(before, after, "hyspec_requests_total", "strategy", "replay", "outcome", "abort"));
        assertEquals(3, delta(before, after, "hyspec_time_to_first_token_seconds_count", "strategy", "replay"));
        assertEquals(1, delta(before, after, "hyspec_time_to_first_token_seconds_count", "strategy", "intermediate-copy"));
        assertEquals(3, delta(before, after, "hyspec_e2e_request_latency_seconds_count", "strategy", "replay"));
        assertEquals(7, delta(before, after, "hyspec_generation_tokens_total", "strategy", "intermediate-copy"));
        assertEquals(6, delta(before, after, "hyspec_prompt_tokens_total", "strategy", "intermediate-copy"));
        assertTrue(delta(before, after, "hyspec_inter_token_latency_seconds_count", "strategy", "replay") >= 2);
        assertTrue(delta(before, after, "hyspec_step_seconds_count") > 0);
    }

    private static double delta(Exposition before, Exposition after, String name, String... labels) {
        return after.sum(name, labels) - before.sum(name, labels);
    }
}
