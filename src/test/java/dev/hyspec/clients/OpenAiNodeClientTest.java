package dev.hyspec.clients;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import java.io.IOException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The official OpenAI Node SDK ({@code openai} on npm, pinned in {@code src/test/node}) against the
 * running server: {@code src/test/node/openai-client.mjs} lists the models, chats blocking and
 * streaming, completes a token-id prompt with {@code return_token_ids} and provokes a 400, checking
 * each answer as it goes. This test runs it, then holds the texts in its summary to the server's
 * own answers for the same requests. The build's {@code npm ci} execution installs the SDK.
 */
@QuarkusTest
class OpenAiNodeClientTest {
    private static final Path PROJECT = Path.of("src/test/node");
    private static final long TIMEOUT_SECONDS = 60;

    @TestHTTPResource("/v1")
    URL baseUrl;

    @Test
    void theOfficialNodeSdkGetsTheServersOwnAnswers() throws Exception {
        JsonNode summary = runClient();

        List<String> models = new ArrayList<>();
        summary.get("models").forEach(m -> models.add(m.textValue()));
        assertTrue(models.contains("nemotron_h_chat"), "the SDK's model list: " + models);

        JsonNode chat = OwnEndpoint.post("/v1/chat/completions", summary.at("/chat/request"), 200);
        String text = chat.at("/choices/0/message/content").textValue();
        assertEquals(text, summary.at("/chat/text").textValue(), "the SDK's chat text");
        assertEquals(text, summary.at("/stream/text").textValue(), "the SDK's streamed chat text");
        assertEquals(chat.at("/choices/0/finish_reason"), summary.at("/stream/finishReason"));
        assertEquals(chat.at("/usage/completion_tokens"), summary.at("/stream/usage/completion_tokens"));

        JsonNode completion = OwnEndpoint.post("/v1/completions", summary.at("/completion/request"), 200);
        assertArrayEquals(OwnEndpoint.ids(completion.at("/choices/0/token_ids")),
                OwnEndpoint.ids(summary.at("/completion/tokenIds")), "the SDK's token ids");
        assertEquals(completion.at("/choices/0/text"), summary.at("/completion/text"));

        assertEquals("BadRequestError", summary.at("/refused/name").textValue());
        assertEquals("model", summary.at("/refused/param").textValue());
    }

    /** Runs the Node client against this server; its JSON summary, once it exited 0. */
    private JsonNode runClient() throws IOException, InterruptedException {
        if (!Files.isDirectory(PROJECT.resolve("node_modules/openai"))) {
            fail(PROJECT + "/node_modules/openai is missing: the build installs it with `npm ci` (exec-maven-plugin, "
                    + "phase generate-test-resources); by hand: (cd " + PROJECT + " && npm ci)");
        }
        Path out = Files.createTempFile("openai-client", ".out");
        Path err = Files.createTempFile("openai-client", ".err");
        Process p;
        try {
            p = new ProcessBuilder("node", "openai-client.mjs", baseUrl.toString()).directory(PROJECT.toFile())
                    .redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        } catch (IOException e) {
            throw new AssertionError("cannot start node (it must be on the PATH): " + e.getMessage(), e);
        }
        try {
            if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                fail("openai-client.mjs did not finish in " + TIMEOUT_SECONDS + " s:\n" + read(out) + read(err));
            }
            String stdout = read(out);
            assertEquals(0, p.exitValue(), "openai-client.mjs failed:\n" + stdout + read(err));
            return OwnEndpoint.JSON.readTree(stdout);
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    private static String read(Path file) throws IOException {
        return Files.readString(file, StandardCharsets.UTF_8);
    }
}
