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
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.openqa.selenium.By;
import org.openqa.selenium.JavascriptExecutor;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.Select;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The page at {@code /} in a real headless chromium against the running service: it lists the
 * model, streams a completion into the output as it is generated, shows the run's strategy and
 * acceptance rate, stops a generation (and the server frees the request) and shows the server's
 * error messages. Screenshots go to {@code target/web-*.png}.
 */
@QuarkusTest
@TestProfile(WebPageBrowserTest.LongContext.class)
class WebPageBrowserTest {
    private static final Duration GENERATION_TIMEOUT = Duration.ofSeconds(60);
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
    private static ChromeDriver driver;

    @TestHTTPResource("/")
    URL page;

    @Inject
    Engine engine;

    @BeforeAll
    static void startBrowser() {
        browser = HeadlessChromium.start();
        driver = browser.driver();
    }

    @AfterAll
    static void stopBrowser() {
        if (browser != null) {
            browser.close();
        }
    }

    @Test
    void showsTheServedModel() {
        open();
        String id = given().get("/v1/models").then().statusCode(200).extract().path("data[0].id");
        assertEquals(id, text("model"));
        assertTrue(element("generate").isEnabled(), "Generate is enabled once a model is listed");
        assertFalse(element("stop").isEnabled(), "Stop is disabled while nothing runs");
        assertFalse(element("error").isDisplayed(), "no error shown");
        screenshot("web-page-loaded.png");
    }

    @Test
    void readsEventsSplitAcrossNetworkReads() {
        open();
        String stream = "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
                + "\"text\":\"h\u00e9llo\",\"finish_reason\":null}]}\r\n\r\n"
                + ": a comment line\n\n"
                + "data: {\"choices\":[{\"index\":0,\"text\":\" w\u00f6rld \u2713\",\"finish_reason\":\"length\"}],"
                + "\"hyspec\":{\"rollback_strategy\":\"replay\",\"draft_tokens\":40,\"accepted_tokens\":25,"
                + "\"acceptance_rate\":0.625,\"cached_prompt_tokens\":0}}\n\n"
                + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7,\"total_tokens\":12}}\n\n"
                + "data: [DONE]\n\n";
        stubCompletions(stream);
        fill("hi", 7);
        element("generate").click();
        awaitState("done");
        assertEquals("h\u00e9llo w\u00f6rld \u2713", outputText(), "every event read, multi-byte characters whole");
        assertEquals("replay", text("stats-strategy"));
        assertEquals("62.5% (25 of 40 draft tokens accepted)", text("stats-acceptance"));
        assertEquals("7 generated, 5 prompt", text("stats-tokens"));
        assertEquals("length", text("stats-finish"));

        Map<?, ?> sent = (Map<?, ?>) js().executeScript("return window.lastCompletionRequest;");
        assertEquals(text("model"), sent.get("model"));
        assertEquals("hi", sent.get("prompt"));
        assertEquals(7L, sent.get("max_tokens"));
        assertEquals(true, sent.get("stream"));
        assertEquals(Map.of("include_usage", true), sent.get("stream_options"));
        assertFalse(sent.containsKey("rollback_strategy"), "the server default: no rollback_strategy sent");
        assertEquals(Map.of("method", "ngram", "num_tokens", 4L), sent.get("speculative"));
    }

    @Test
    void showsAnErrorSentMidStream() {
        open();
        stubCompletions("data: {\"choices\":[{\"index\":0,\"text\":\"partial\",\"finish_reason\":null}]}\n\n"
                + "data: {\"error\":{\"message\":\"the engine failed: out of KV pages\",\"type\":\"server_error\","
                + "\"param\":null,\"code\":null}}\n\n"
                + "data: [DONE]\n\n");
        fill("hi", 7);
        new Select(element("strategy")).selectByValue("replay");
        new Select(element("spec-method")).selectByValue("none");
        element("generate").click();
        awaitState("error");
        assertTrue(text("error").contains("the engine failed: out of KV pages"), text("error"));
        assertEquals("partial", outputText(), "what arrived before the error stays");
        Map<?, ?> sent = (Map<?, ?>) js().executeScript("return window.lastCompletionRequest;");
        assertEquals("replay", sent.get("rollback_strategy"));
        assertEquals(Map.of("method", "none"), sent.get("speculative"));
    }

    @Test
    void streamsTheCompletionAndShowsTheRunsStats() {
        open();
        Map<String, Object> request = new LinkedHashMap<>(Map.of("model", text("model"), "max_tokens", 256,
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

        fill((String) request.get("prompt"), 256);
        new Select(element("strategy")).selectByValue("intermediate-copy");
        new Select(element("spec-method")).selectByValue("ngram");
        element("spec-k").clear();
        element("spec-k").sendKeys("4");
        element("generate").click();
        awaitState("done");

        assertEquals(expected.text(), outputText(),
                "the output area holds the generated text (greedy: the API's own answer to the same request)");
        assertTrue(Integer.parseInt(element("output").getDomAttribute("data-updates")) > 1,
                "the output was written in several updates as chunks arrived");
        assertEquals("intermediate-copy", text("stats-strategy"), "the stats show the strategy the run used");
        assertEquals(String.format(java.util.Locale.ROOT, "%.1f%% (%d of %d draft tokens accepted)",
                        100 * stats.path("acceptance_rate").asDouble(), stats.path("accepted_tokens").asLong(),
                        stats.path("draft_tokens").asLong()),
                text("stats-acceptance"), "the acceptance rate with the accepted and proposed draft tokens");
        assertEquals(stats.path("acceptance_rate").asDouble(),
                Double.parseDouble(element("stats-acceptance").getDomAttribute("data-rate")));
        assertTrue(text("stats-tokens").startsWith("256 generated, "), text("stats-tokens"));
        assertTrue(text("stats-speed").matches("[\\d.]+ tokens/s \\([\\d.]+ s\\)"), "tokens/s shown: "
                + text("stats-speed"));
        assertEquals("length", text("stats-finish"));
        assertFalse(element("error").isDisplayed());
        screenshot("web-page-done.png");
    }

    @Test
    void stopEndsALongGenerationAndTheServerFreesIt() {
        open();
        fill(PROMPT, LONG_MAX_TOKENS);
        new Select(element("spec-method")).selectByValue("none");
        // the page's own request, with vLLM's ignore_eos added so that the run is as long as max_tokens
        js().executeScript("""
                const realFetch = window.fetch;
                window.fetch = (url, init) => {
                  if (String(url).endsWith('/v1/completions')) {
                    init = {...init, body: JSON.stringify({...JSON.parse(init.body), ignore_eos: true})};
                  }
                  return realFetch(url, init);
                };""");
        element("generate").click();

        // text appears while the stream runs: two distinct non-empty lengths seen with status still "streaming"
        Set<Long> lengths = new LinkedHashSet<>();
        long deadline = System.nanoTime() + GENERATION_TIMEOUT.toNanos();
        while (lengths.size() < 2) {
            Map<?, ?> seen = (Map<?, ?>) js().executeScript("return {state: document.getElementById('status')"
                    + ".dataset.state, length: document.getElementById('output').textContent.length};");
            String state = (String) seen.get("state");
            long length = (Long) seen.get("length");
            if (!state.equals("streaming")) {
                fail("the generation ended (" + state + ") before its output was seen growing while streaming; "
                        + "lengths seen: " + lengths + "; error: " + element("error").getText());
            }
            if (length > 0) {
                lengths.add(length);
            }
            if (System.nanoTime() > deadline) {
                fail("no streamed output within " + GENERATION_TIMEOUT + "; lengths seen: " + lengths);
            }
        }
        assertEquals(1, engine.inFlight(), "the server runs the page's request");
        long aborted = engine.metrics().orElseThrow().aborted;

        element("stop").click();
        awaitState("stopped");
        awaitInFlight(0, Duration.ofSeconds(5));
        assertEquals(aborted + 1, engine.metrics().orElseThrow().aborted, "the engine aborted the request");
        String stoppedAt = outputText();
        assertFalse(stoppedAt.isEmpty());
        assertEquals("–", text("stats-finish"), "stopped before any finish reason arrived");
        assertFalse(element("error").isDisplayed(), "a stop is not an error");
        assertTrue(element("generate").isEnabled() && !element("stop").isEnabled());
        screenshot("web-page-stopped.png");
    }

    @Test
    void showsTheServersErrorForARejectedStrategy() {
        open();
        fill(PROMPT, 16);
        // a strategy the selector does not offer, as a script or a stale page might send
        js().executeScript("const o = document.createElement('option'); o.value = 'no-such-strategy';"
                + " o.textContent = 'no-such-strategy'; document.getElementById('strategy').append(o);");
        new Select(element("strategy")).selectByValue("no-such-strategy");
        element("generate").click();
        awaitState("error");

        String message = given().contentType(ContentType.JSON)
                .body(Map.of("model", text("model"), "prompt", PROMPT, "max_tokens", 16, "stream", true,
                        "rollback_strategy", "no-such-strategy"))
                .post("/v1/completions").then().statusCode(400).extract().path("error.message");
        assertTrue(element("error").isDisplayed(), "the error is shown");
        assertTrue(text("error").contains(message), "the page shows the server's message '" + message + "': "
                + text("error"));
        assertEquals("", outputText());
        assertTrue(element("generate").isEnabled(), "the page can generate again");
        screenshot("web-page-error.png");
    }

    @Test
    void showsTheServersErrorForABadMaxTokens() {
        open();
        fill(PROMPT, 1_000_000);
        element("generate").click();
        awaitState("error");
        String message = given().contentType(ContentType.JSON)
                .body(Map.of("model", text("model"), "prompt", PROMPT, "max_tokens", 1_000_000, "stream", true))
                .post("/v1/completions").then().statusCode(400).extract().path("error.message");
        assertTrue(text("error").contains(message), "the page shows the server's message '" + message + "': "
                + text("error"));
    }

    // --- helpers

    private void open() {
        driver.get(page.toString());
        awaitState("idle");
    }

    private void fill(String prompt, int maxTokens) {
        element("prompt").clear();
        element("prompt").sendKeys(prompt);
        element("max-tokens").clear();
        element("max-tokens").sendKeys(Integer.toString(maxTokens));
    }

    /** Waits for the page to settle (neither loading nor streaming) and checks it settled in {@code state}. */
    private void awaitState(String state) {
        try {
            new WebDriverWait(driver, GENERATION_TIMEOUT, Duration.ofMillis(50)).until(d -> {
                String now = element("status").getDomAttribute("data-state");
                return !now.equals("loading") && !now.equals("streaming");
            });
        } catch (org.openqa.selenium.TimeoutException e) {
            fail("the page is still '" + text("status") + "' after " + GENERATION_TIMEOUT + " (waiting for '" + state
                    + "')", e);
        }
        assertEquals(state, text("status"), "the page's status (error shown: '" + text("error") + "')");
    }

    private void awaitInFlight(int expected, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (engine.inFlight() != expected) {
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

    /**
     * Replaces the page's {@code fetch} of {@code /v1/completions} with {@code stream} delivered one
     * byte per read (events and UTF-8 characters split across reads); keeps the request body in
     * {@code window.lastCompletionRequest}.
     */
    private void stubCompletions(String stream) {
        js().executeScript("""
                const stream = arguments[0];
                const realFetch = window.fetch;
                window.fetch = (url, init) => {
                  if (!String(url).endsWith('/v1/completions')) {
                    return realFetch(url, init);
                  }
                  window.lastCompletionRequest = JSON.parse(init.body);
                  const bytes = new TextEncoder().encode(stream);
                  let next = 0;
                  const body = new ReadableStream({
                    pull(controller) {
                      if (next < bytes.length) {
                        controller.enqueue(bytes.slice(next, ++next));
                      } else {
                        controller.close();
                      }
                    },
                  });
                  return Promise.resolve(new Response(body, {headers: {'Content-Type': 'text/event-stream'}}));
                };""", stream);
    }

    private WebElement element(String id) {
        return driver.findElement(By.id(id));
    }

    private String text(String id) {
        return (String) js().executeScript("return document.getElementById(arguments[0]).textContent;", id);
    }

    /** The output's exact text (WebElement.getText() trims and normalises whitespace). */
    private String outputText() {
        return text("output");
    }

    private JavascriptExecutor js() {
        return driver;
    }

    private static void screenshot(String name) {
        try {
            Path out = Path.of("target", name);
            Files.createDirectories(out.getParent());
            Files.write(out, driver.getScreenshotAs(OutputType.BYTES));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
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
            throw new java.io.UncheckedIOException(e);
        }
        return new Completion(text.toString(), hyspec);
    }
}
