package dev.hyspec.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;

/** Parses an SSE body as OpenAI sends it and checks its framing: {@code data: {json}} events, {@code data: [DONE]} last. */
final class Sse {
    static final ObjectMapper JSON = new ObjectMapper();

    private Sse() {}

    /** The JSON events before {@code [DONE]}; fails unless the framing is exact. */
    static List<JsonNode> events(String body) {
        assertTrue(body.endsWith("data: [DONE]\n\n"), "the stream ends with data: [DONE]: " + tail(body));
        String[] blocks = body.split("\n\n", -1);
        List<JsonNode> out = new ArrayList<>();
        for (int i = 0; i < blocks.length - 2; i++) {
            String b = blocks[i];
            assertTrue(b.startsWith("data: ") && !b.contains("\n"), "one data line per event: " + b);
            assertTrue(!b.equals("data: [DONE]"), "[DONE] only once, at the end");
            try {
                out.add(JSON.readTree(b.substring("data: ".length())));
            } catch (Exception e) {
                throw new AssertionError("event is not JSON: " + b, e);
            }
        }
        assertEquals("data: [DONE]", blocks[blocks.length - 2]);
        assertEquals("", blocks[blocks.length - 1]);
        return out;
    }

    private static String tail(String s) {
        return s.length() > 200 ? s.substring(s.length() - 200) : s;
    }
}
