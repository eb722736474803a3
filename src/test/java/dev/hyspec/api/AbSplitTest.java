package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.hyspec.engine.Engine;
import dev.hyspec.metrics.Exposition;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.http.ContentType;
import jakarta.inject.Inject;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code hyspec.rollback.ab} splits unpinned requests between the strategies; a pin wins; greedy
 * output does not depend on the strategy; the meters tell the two arms apart by their
 * {@code strategy} tag.
 */
@QuarkusTest
@TestProfile(AbSplitTest.Split.class)
class AbSplitTest {
    /** An even split, default intermediate-copy. */
    public static class Split implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("hyspec.rollback.ab", "replay=50,intermediate-copy=50",
                    "hyspec.rollback.strategy", "intermediate-copy");
        }
    }

    @Inject
    Engine engine;

    private static JsonNode complete(String pin) {
        String body = "{\"prompt\": [7, 8, 9, 7, 8, 9, 7], \"max_tokens\": 12, \"temperature\": 0, \"ignore_eos\": true,"
                + " \"return_token_ids\": true" + (pin == null ? "" : ", \"rollback_strategy\": \"" + pin + "\"") + "}";
        String res = given().contentType(ContentType.JSON).body(body).post("/v1/completions").then().statusCode(200)
                .extract().asString();
        try {
            return Sse.JSON.readTree(res);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void unpinnedRequestsAreSplitPinnedOnesKeepTheirPin() {
        Exposition before = Exposition.scrape();
        Map<String, Integer> arms = new HashMap<>();
        int[] reference = CompletionsApiTest.ids(complete("replay").at("/choices/0/token_ids"));
        for (int i = 0; i < 24; i++) {
            JsonNode r = complete(null);
            arms.merge(r.at("/hyspec/rollback_strategy").textValue(), 1, Integer::sum);
            assertArrayEquals(reference, CompletionsApiTest.ids(r.at("/choices/0/token_ids")), "same greedy output");
        }
        assertEquals(2, arms.size(), "both arms got traffic: " + arms);
        assertTrue(arms.get("replay") >= 4 && arms.get("intermediate-copy") >= 4, "a roughly even split: " + arms);
        for (int i = 0; i < 4; i++) {
            assertEquals("intermediate-copy", complete("intermediate-copy").at("/hyspec/rollback_strategy").textValue());
        }
        Awaits.idle(engine);
        Exposition after = Exposition.scrape();
        double replay = after.sum("hyspec_requests_total", "strategy", "replay")
                - before.sum("hyspec_requests_total", "strategy", "replay");
        double copy = after.sum("hyspec_requests_total", "strategy", "intermediate-copy")
                - before.sum("hyspec_requests_total", "strategy", "intermediate-copy");
        assertEquals(arms.get("replay") + 1, (int) replay);
        assertEquals(arms.get("intermediate-copy") + 4, (int) copy);
    }
}
