package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.config.HyspecConfig;
import dev.hyspec.engine.LoadedModel;
import dev.hyspec.engine.ModelRegistry;
import dev.hyspec.testing.Fixtures;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import jakarta.inject.Inject;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The server with no model configured serves the embedded default model ({@code models/kjv-hybrid}):
 * it loads with its tokenizer and chat template, streams a greedy continuation of "In the beginning
 * God created" over SSE (transformers' rollout, as text), and n-gram speculative decoding on a
 * repetitive prompt accepts drafts under both rollback strategies while the output stays the same.
 */
@QuarkusTest
@TestProfile(EmbeddedModelApiTest.NoModelPath.class)
class EmbeddedModelApiTest {
    /** Clears the test profile's hyspec.model.path: the application runs as with no configuration. */
    public static class NoModelPath implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("%test.hyspec.model.path", "", "hyspec.model.path", "");
        }
    }

    static final String GENESIS = "In the beginning God created";
    /** transformers' greedy continuation (models/kjv-hybrid/reference.json, prompt 0), decoded. */
    static final String GENESIS_CONTINUATION = " the gospel of the law.\nAnd the LORD spake unto Moses, saying,\n"
            + "Speak unto the children of Israel, and say unto them, Thus saith the";
    static final String REPETITIVE = "the LORD, and the LORD, and the LORD, and the LORD, and the LORD,";

    @Inject
    HyspecConfig config;

    @Inject
    ModelRegistry registry;

    @Test
    void theEmbeddedModelLoadsWithNoConfiguration() {
        assertTrue(config.model().path().isEmpty(), "hyspec.model.path is not set");
        LoadedModel m = registry.model().orElseThrow(() -> new AssertionError("no model loaded"));
        assertEquals(Path.of(ModelRegistry.EMBEDDED_MODEL).toAbsolutePath().normalize(), m.dir());
        assertEquals("kjv-hybrid", m.id());
        assertTrue(m.tokenizer().isPresent(), "tokenizer");
        assertEquals(4096, m.model().config().vocabSize());
        given().when().get("/v1/models").then().statusCode(200).body("data[0].id", equalTo("kjv-hybrid"));
    }

    @Test
    void greedyContinuationOfGenesisStreamsOverSse() {
        Fixtures.Fixture ref = Fixtures.under(Path.of(ModelRegistry.EMBEDDED_MODEL)).get(0);
        ObjectNode body = Sse.JSON.createObjectNode();
        body.put("prompt", GENESIS);
        body.put("max_tokens", 32);
        body.put("temperature", 0);
        body.put("return_token_ids", true);
        CompletionsApiTest.Streamed s = CompletionsApiTest.stream("/v1/completions", body);
        assertTrue(s.events().size() >= 8, "streamed in many chunks: " + s.events().size());
        assertArrayEquals(ref.greedy().get(0), s.tokenIds(), "transformers' greedy rollout");
        assertEquals(GENESIS_CONTINUATION, s.text());
    }

    @Test
    void ngramSpeculationAcceptsDraftsOnARepetitivePromptWithBothStrategies() {
        ObjectNode plain = repetitive();
        plain.putObject("speculative").put("method", "none");
        JsonNode expected = CompletionsApiTest.ok("/v1/completions", plain).at("/choices/0/token_ids");
        for (String strategy : List.of("replay", "intermediate-copy")) {
            ObjectNode body = repetitive();
            body.put("rollback_strategy", strategy);
            body.putObject("speculative").put("method", "ngram").put("num_tokens", 3);
            JsonNode res = CompletionsApiTest.ok("/v1/completions", body);
            double rate = res.at("/hyspec/acceptance_rate").doubleValue();
            System.out.printf("embedded model, n-gram drafts, %s: %d of %d accepted (%.3f)%n", strategy,
                    res.at("/hyspec/accepted_tokens").longValue(), res.at("/hyspec/draft_tokens").longValue(), rate);
            assertEquals(strategy, res.at("/hyspec/rollback_strategy").textValue());
            assertEquals(expected, res.at("/choices/0/token_ids"), strategy + ": same output as without drafts");
            assertTrue(res.at("/hyspec/draft_tokens").longValue() > 0, strategy + ": drafts proposed");
            assertTrue(rate >= 0.5, strategy + ": acceptance rate " + rate);
        }
    }

    private static ObjectNode repetitive() {
        ObjectNode body = Sse.JSON.createObjectNode();
        body.put("prompt", REPETITIVE);
        body.put("max_tokens", 48);
        body.put("temperature", 0);
        body.put("ignore_eos", true);
        body.put("return_token_ids", true);
        return body;
    }
}
