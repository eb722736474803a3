package dev.hyspec.web;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import java.net.URL;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The page's reading of server-sent events in headless chromium, with {@code /v1/completions}
 * answered by a stub inside the page that delivers one byte per read: events, CRLF line ends and
 * multi-byte characters split across reads, comments, the stats chunk, the usage chunk and an
 * error chunk mid-stream; and the request body the page sends.
 */
@QuarkusTest
class WebPageStreamTest {
    private static HeadlessChromium browser;

    @TestHTTPResource("/")
    URL url;

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
    void readsEventsSplitAcrossNetworkReads() {
        page.stubCompletions("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
                + "\"text\":\"h\u00e9llo\",\"finish_reason\":null}]}\r\n\r\n"
                + ": a comment line\n\n"
                + "data: {\"choices\":[{\"index\":0,\"text\":\" w\u00f6rld \u2713\",\"finish_reason\":\"length\"}],"
                + "\"hyspec\":{\"rollback_strategy\":\"replay\",\"draft_tokens\":40,\"accepted_tokens\":25,"
                + "\"acceptance_rate\":0.625,\"cached_prompt_tokens\":0}}\n\n"
                + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7,\"total_tokens\":12}}\n\n"
                + "data: [DONE]\n\n");
        page.fill("hi", 7);
        page.click("generate");
        page.awaitState("done");
        assertEquals("h\u00e9llo w\u00f6rld \u2713", page.output(), "every event read, multi-byte characters whole");
        assertEquals("replay", page.text("stats-strategy"));
        assertEquals("62.5% (25 of 40 draft tokens accepted)", page.text("stats-acceptance"));
        assertEquals("7 generated, 5 prompt", page.text("stats-tokens"));
        assertEquals("length", page.text("stats-finish"));

        Map<?, ?> sent = (Map<?, ?>) page.script("return window.lastCompletionRequest;");
        assertEquals(page.text("model"), sent.get("model"));
        assertEquals("hi", sent.get("prompt"));
        assertEquals(7L, sent.get("max_tokens"));
        assertEquals(0L, sent.get("temperature"));
        assertEquals(true, sent.get("stream"));
        assertEquals(Map.of("include_usage", true), sent.get("stream_options"));
        assertFalse(sent.containsKey("rollback_strategy"), "the server default: no rollback_strategy sent");
        assertEquals(Map.of("method", "ngram", "num_tokens", 4L), sent.get("speculative"));
    }

    @Test
    void showsAnErrorSentMidStream() {
        page.stubCompletions("data: {\"choices\":[{\"index\":0,\"text\":\"partial\",\"finish_reason\":null}]}\n\n"
                + "data: {\"error\":{\"message\":\"the engine failed: out of KV pages\",\"type\":\"server_error\","
                + "\"param\":null,\"code\":null}}\n\n"
                + "data: [DONE]\n\n");
        page.fill("hi", 7);
        page.select("strategy", "replay");
        page.select("spec-method", "none");
        page.click("generate");
        page.awaitState("error");
        assertTrue(page.text("error").contains("the engine failed: out of KV pages"), page.text("error"));
        assertEquals("partial", page.output(), "what arrived before the error stays");
        Map<?, ?> sent = (Map<?, ?>) page.script("return window.lastCompletionRequest;");
        assertEquals("replay", sent.get("rollback_strategy"));
        assertEquals(Map.of("method", "none"), sent.get("speculative"));
    }

    @Test
    void showsAStreamCutBeforeDone() {
        page.stubCompletions("data: {\"choices\":[{\"index\":0,\"text\":\"cut\",\"finish_reason\":null}]}\n\n");
        page.fill("hi", 7);
        page.click("generate");
        page.awaitState("error");
        assertTrue(page.text("error").contains("ended before [DONE]"), page.text("error"));
        assertEquals("cut", page.output());
    }
}
