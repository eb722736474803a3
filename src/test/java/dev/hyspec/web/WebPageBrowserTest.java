package dev.hyspec.web;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.hyspec.engine.Engine;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.http.ContentType;
import jakarta.inject.Inject;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URL;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The page at {@code /} in a real headless chromium against the running service: it lists the
 * model, streams a completion into the output as it is generated, shows the run's strategy and
 * acceptance rate, stops a generation (and the engine frees the request) and shows the server's
 * error messages. Screenshots go to {@code target/web-page-*.png}.
 */
@QuarkusTest
@TestProfile(WebPageBrowserTest.LongContext.class)
class WebPageBrowserTest {
    private static final String PROMPT = "the cat sat on the mat. the cat sat on the mat. the cat sat on the";
    /**
     * Prompts to try until the test model's greedy run proposes drafts: its weights are random, so
     * the n-gram drafter only finds matches once the output happens to repeat itself.
     */
    private static final List<String> DRAFTING_PROMPTS = List.of(PROMPT, "abc abc abc abc abc", "In the beginning",
            "Once upon a time", "The quick brown fox", "water water water");
    /**
     * The stop test's generation: many seconds of decoding (the test model's greedy run would end
     * at its EOS after about 2,000 tokens, so the test asks for {@code ignore_eos}), where Stop
     * comes within a second.
     */
    private static final int LONG_MAX_TOKENS = 16_000;

    /** A context long enough for {@link #LONG_MAX_TOKENS}. */
    public static class LongContext implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("hyspec.scheduler.max-model-len", "16384");
        }
    }

    private static HeadlessChromium browser;

    @TestHTTPResource("/")
    URL url;

    @Inject
    Engine engine;

    private WebPage page;

    @BeforeAll
    static void startBrowser() {
        browser = HeadlessChromium.start();
    }

    @AfterAll
    static void stopBrowser() {
        if (browser != null) {
            browser.close();
        }
    }

    @BeforeEach
    void openPage() {
        page = new WebPage(browser.driver(), url);
        page.open();
    }

    @Test
    void showsTheServedModel() {
        String id = given().get("/v1/models").then().statusCode(200).extract().path("data[0].id");
        assertEquals(id, page.text("model"));
        assertTrue(page.element("generate").isEnabled(), "Generate is enabled once a model is listed");
        assertFalse(page.element("stop").isEnabled(), "Stop is disabled while nothing runs");
        assertFalse(page.element("error").isDisplayed(), "no error shown");
        page.screenshot("web-page-loaded.png");
    }

    @Test
    void streamsTheCompletionAndShowsTheRunsStats() {
        Map<String, Object> request = new LinkedHashMap<>(Map.of("model", page.text("model"), "max_tokens", 256,
                "temperature", 0, "rollback_strategy", "intermediate-copy",
                "speculative", Map.of("method", "ngram", "num_tokens", 4)));
        Completion expected = null;
        for (String prompt : DRAFTING_PROMPTS) {
            request.put("prompt", prompt);
            expected = complete(request);
            if (expected.hyspec().path("draft_tokens").asLong() > 0) {
                break;
            }
        }
        JsonNode stats = expected.hyspec();
        assertTrue(stats.path("draft_tokens").asLong() > 0, "none of " + DRAFTING_PROMPTS + " makes the test model "
                + "propose drafts within 256 tokens; add a prompt");
        assertFalse(expected.text().isEmpty(), "the API generated text");

        page.fill((String) request.get("prompt"), 256);
        page.select("strategy", "intermediate-copy");
        page.select("spec-method", "ngram");
        page.element("spec-k").clear();
        page.element("spec-k").sendKeys("4");
        page.click("generate");
        page.awaitState("done");

        assertEquals(expected.text(), page.output(),
                "the output area holds the generated text (greedy: the API's own answer to the same request)");
        assertTrue(Integer.parseInt(page.element("output").getDomAttribute("data-updates")) > 1,
                "the output was written in several updates as chunks arrived");
        assertEquals("intermediate-copy", page.text("stats-strategy"), "the stats show the strategy the run used");
        assertEquals(String.format(Locale.ROOT, "%.1f%% (%d of %d draft tokens accepted)",
                        100 * stats.path("acceptance_rate").asDouble(), stats.path("accepted_tokens").asLong(),
                        stats.path("draft_tokens").asLong()),
                page.text("stats-acceptance"), "the acceptance rate with the accepted and proposed draft tokens");
        assertEquals(stats.path("acceptance_rate").asDouble(),
                Double.parseDouble(page.element("stats-acceptance").getDomAttribute("data-rate")));
        assertTrue(page.text("stats-tokens").startsWith("256 generated, "), page.text("stats-tokens"));
        assertTrue(page.text("stats-speed").matches("[\\d.]+ tokens/s \\([\\d.]+ s\\)"),
                "tokens/s shown: " + page.text("stats-speed"));
        assertEquals("length", page.text("stats-finish"));
        assertFalse(page.element("error").isDisplayed());
        page.screenshot("web-page-done.png");
    }

    @Test
    void stopEndsALongGenerationAndTheEngineFreesIt() {
        page.fill(PROMPT, LONG_MAX_TOKENS);
        page.select("spec-method", "none");
        page.addToCompletionRequests("ignore_eos", true);
        page.click("generate");

        // text appears while the stream runs: two distinct non-empty lengths seen with the status still "streaming"
        Set<Long> lengths = new LinkedHashSet<>();
        long deadline = System.nanoTime() + WebPage.GENERATION_TIMEOUT.toNanos();
        while (lengths.size() < 2) {
            Map<?, ?> seen = (Map<?, ?>) page.script("return {state: document.getElementById('status').dataset.state,"
                    + " length: document.getElementById('output').textContent.length};");
            if (!seen.get("state").equals("streaming")) {
                fail("the generation ended (" + seen.get("state") + ") before its output was seen growing while "
                        + "streaming; lengths seen: " + lengths + "; error: " + page.text("error"));
            }
            if ((Long) seen.get("length") > 0) {
                lengths.add((Long) seen.get("length"));
            }
            if (System.nanoTime() > deadline) {
                fail("no streamed output within " + WebPage.GENERATION_TIMEOUT + "; lengths seen: " + lengths);
            }
        }
        assertEquals(1, engine.inFlight(), "the engine runs the page's request");
        long aborted = engine.metrics().orElseThrow().aborted;

        page.click("stop");
        page.awaitState("stopped");
        awaitNoneInFlight(Duration.ofSeconds(5));
        assertEquals(aborted + 1, engine.metrics().orElseThrow().aborted, "the engine aborted the request");
        assertFalse(page.output().isEmpty());
        assertEquals("–", page.text("stats-finish"), "stopped before any finish reason arrived");
        assertFalse(page.element("error").isDisplayed(), "a stop is not an error");
        assertTrue(page.element("generate").isEnabled() && !page.element("stop").isEnabled());
        page.screenshot("web-page-stopped.png");
    }

    @Test
    void showsTheServersErrorForARejectedStrategy() {
        page.fill(PROMPT, 16);
        // a strategy the selector does not offer, as a script or a stale page might send
        page.script("const o = document.createElement('option'); o.value = o.textContent = 'no-such-strategy';"
                + " document.getElementById('strategy').append(o);");
        page.select("strategy", "no-such-strategy");
        page.click("generate");
        page.awaitState("error");

        String message = rejection(Map.of("model", page.text("model"), "prompt", PROMPT, "max_tokens", 16,
                "stream", true, "rollback_strategy", "no-such-strategy"));
        assertTrue(page.element("error").isDisplayed(), "the error is shown");
        assertTrue(page.text("error").contains(message), "the page shows the server's message '" + message + "': "
                + page.text("error"));
        assertEquals("", page.output());
        assertTrue(page.element("generate").isEnabled(), "the page can generate again");
        page.screenshot("web-page-error.png");
    }

    @Test
    void showsTheServersErrorForTooManyTokens() {
        page.fill(PROMPT, 1_000_000);
        page.click("generate");
        page.awaitState("error");
        String message = rejection(Map.of("model", page.text("model"), "prompt", PROMPT, "max_tokens", 1_000_000,
                "stream", true));
        assertTrue(page.text("error").contains(message), "the page shows the server's message '" + message + "': "
                + page.text("error"));
    }

    private void awaitNoneInFlight(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (engine.inFlight() != 0) {
            if (System.nanoTime() > deadline) {
                fail("the engine still has " + engine.inFlight() + " requests in flight " + timeout + " after Stop");
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(e);
            }
        }
    }

    /** The API's 400 message for {@code request}. */
    private static String rejection(Map<String, Object> request) {
        return given().contentType(ContentType.JSON).body(request).post("/v1/completions")
                .then().statusCode(400).extract().path("error.message");
    }

    /** What the API streamed for one request: the text of its chunks and its {@code hyspec} stats. */
    private record Completion(String text, JsonNode hyspec) {}

    /** Posts {@code request} with {@code stream: true} and reads its server-sent events. */
    private static Completion complete(Map<String, Object> request) {
        Map<String, Object> body = new LinkedHashMap<>(request);
        body.put("stream", true);
        String events = given().contentType(ContentType.JSON).body(body).post("/v1/completions")
                .then().statusCode(200).extract().asString();
        ObjectMapper json = new ObjectMapper();
        StringBuilder text = new StringBuilder();
        JsonNode hyspec = json.missingNode();
        try {
            for (String event : events.split("\n\n")) {
                if (!event.startsWith("data: ") || event.equals("data: [DONE]")) {
                    continue;
                }
                JsonNode chunk = json.readTree(event.substring(6));
                for (JsonNode choice : chunk.path("choices")) {
                    text.append(choice.path("text").asText(""));
                }
                if (chunk.has("hyspec")) {
                    hyspec = chunk.get("hyspec");
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new Completion(text.toString(), hyspec);
    }
}
