package dev.hyspec.clients;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.engine.ModelRegistry;
import dev.hyspec.tokenizer.Tokenizer;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.data.message.SystemMessage;
import dev.langchain4j.data.message.UserMessage;
import dev.langchain4j.exception.InvalidRequestException;
import dev.langchain4j.model.chat.response.ChatResponse;
import dev.langchain4j.model.chat.response.StreamingChatResponseHandler;
import dev.langchain4j.model.openai.OpenAiChatModel;
import dev.langchain4j.model.openai.OpenAiStreamingChatModel;
import dev.langchain4j.model.output.FinishReason;
import dev.langchain4j.model.output.TokenUsage;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import java.net.URL;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * LangChain4j's OpenAI client ({@code langchain4j-open-ai}, JDK HTTP client) against the running
 * server, as a Java application would use it: a streamed chat, the same chat blocking, and a
 * refused request. Its answers are held to the server's own JSON for the same messages, and that
 * text to the tokenizer's decoding of the returned token ids.
 */
@QuarkusTest
class LangChain4jClientTest {
    private static final String MODEL = "nemotron_h_chat";
    private static final int MAX_TOKENS = 24;
    private static final String SYSTEM = "You are a terse assistant.";
    private static final String USER = "Name three colours.";
    private static final List<ChatMessage> MESSAGES = List.of(SystemMessage.from(SYSTEM), UserMessage.from(USER));
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    @TestHTTPResource("/v1")
    URL baseUrl;

    @Inject
    ModelRegistry registry;

    /** What LangChain4j's streaming handler saw. */
    private record Streamed(List<String> partials, ChatResponse response) {}

    @Test
    void streamedChatEqualsTheBlockingChatAndTheServersOwnAnswer() throws Exception {
        JsonNode reference = reference(MODEL);
        String text = reference.at("/choices/0/message/content").textValue();
        Tokenizer tok = registry.model().orElseThrow().tokenizer().orElseThrow();
        assertEquals(tok.decode(OwnEndpoint.ids(reference.at("/choices/0/token_ids")), true), text,
                "the server's text is the decoding of its token ids");

        Streamed streamed = stream(streaming(MODEL));
        ChatResponse s = streamed.response();
        assertTrue(streamed.partials().size() >= 3, "several partial responses: " + streamed.partials());
        assertEquals(String.join("", streamed.partials()), s.aiMessage().text(),
                "the complete response is the partials put together");
        assertEquals(text, s.aiMessage().text(), "streamed text equals the server's own answer");
        assertEquals(finishReason(reference), s.finishReason());
        // LangChain4j asks for stream_options.include_usage, so the usage chunk must reach it
        assertUsage(reference, s.tokenUsage());

        ChatResponse b = blocking(MODEL).chat(MESSAGES);
        assertEquals(text, b.aiMessage().text(), "blocking text equals the server's own answer");
        assertEquals(finishReason(reference), b.finishReason());
        assertUsage(reference, b.tokenUsage());
    }

    @Test
    void aRefusedRequestIsAnErrorCarryingTheServersMessage() throws Exception {
        String model = "no-such-model";
        JsonNode error = OwnEndpoint.post("/v1/chat/completions", referenceBody(model), 400).get("error");
        assertEquals("model", error.get("param").textValue());

        InvalidRequestException blocking = assertThrows(InvalidRequestException.class,
                () -> blocking(model).chat(MESSAGES));
        assertEquals(error, errorIn(blocking));

        ExecutionException streamed = assertThrows(ExecutionException.class, () -> stream(streaming(model)),
                "onError, not onCompleteResponse");
        assertEquals(error, errorIn(assertInstanceOf(InvalidRequestException.class, streamed.getCause())));
    }

    private OpenAiStreamingChatModel streaming(String model) {
        return OpenAiStreamingChatModel.builder().baseUrl(baseUrl.toString()).apiKey("unused").modelName(model)
                .temperature(0.0).maxTokens(MAX_TOKENS).timeout(TIMEOUT).build();
    }

    private OpenAiChatModel blocking(String model) {
        // no retries: a refused request must fail once, at once
        return OpenAiChatModel.builder().baseUrl(baseUrl.toString()).apiKey("unused").modelName(model)
                .temperature(0.0).maxTokens(MAX_TOKENS).timeout(TIMEOUT).maxRetries(0).build();
    }

    /** Streams {@link #MESSAGES}; an {@code onError} fails the returned call with its throwable as the cause. */
    private static Streamed stream(OpenAiStreamingChatModel model) throws Exception {
        List<String> partials = new CopyOnWriteArrayList<>();
        CompletableFuture<ChatResponse> done = new CompletableFuture<>();
        model.chat(MESSAGES, new StreamingChatResponseHandler() {
            @Override
            public void onPartialResponse(String partial) {
                partials.add(partial);
            }

            @Override
            public void onCompleteResponse(ChatResponse response) {
                done.complete(response);
            }

            @Override
            public void onError(Throwable error) {
                done.completeExceptionally(error);
            }
        });
        return new Streamed(partials, done.get(TIMEOUT.toSeconds(), TimeUnit.SECONDS));
    }

    /** The same chat as LangChain4j sends it, as plain JSON, with the token ids. */
    private static ObjectNode referenceBody(String model) {
        ObjectNode body = OwnEndpoint.JSON.createObjectNode();
        body.put("model", model);
        ArrayNode messages = body.putArray("messages");
        messages.addObject().put("role", "system").put("content", SYSTEM);
        messages.addObject().put("role", "user").put("content", USER);
        body.put("temperature", 0);
        body.put("max_tokens", MAX_TOKENS);
        body.put("return_token_ids", true);
        return body;
    }

    private static JsonNode reference(String model) {
        return OwnEndpoint.post("/v1/chat/completions", referenceBody(model), 200);
    }

    private static FinishReason finishReason(JsonNode reference) {
        String reason = reference.at("/choices/0/finish_reason").textValue();
        return switch (reason) {
            case "length" -> FinishReason.LENGTH;
            case "stop" -> FinishReason.STOP;
            default -> throw new AssertionError("unexpected finish reason " + reason);
        };
    }

    /** Token counts only: {@code cached_tokens} differs from one request to the next (the prefix cache). */
    private static void assertUsage(JsonNode reference, TokenUsage usage) {
        assertNotNull(usage, "token usage is reported");
        assertEquals(reference.at("/usage/prompt_tokens").intValue(), usage.inputTokenCount());
        assertEquals(reference.at("/usage/completion_tokens").intValue(), usage.outputTokenCount());
        assertEquals(reference.at("/usage/total_tokens").intValue(), usage.totalTokenCount());
    }

    /** LangChain4j puts the server's error body in the exception's message: its {@code error} object. */
    private static JsonNode errorIn(InvalidRequestException e) throws JsonProcessingException {
        return OwnEndpoint.JSON.readTree(e.getMessage()).get("error");
    }
}
