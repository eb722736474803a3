package dev.hyspec.api;

import dev.hyspec.tokenizer.ChatMessage;
import java.util.List;

/**
 * One {@code /v1/completions} or {@code /v1/chat/completions} request, read and type-checked.
 *
 * @param chat           a chat request (messages) rather than a completion (prompt)
 * @param model          the model the client named, or null
 * @param promptIds      the prompt as token ids, or null when given as text
 * @param promptText     the prompt as text, or null
 * @param messages       the chat messages (chat only)
 * @param maxTokens      {@code max_tokens} / {@code max_completion_tokens}, or null for the default
 * @param temperature    sampling temperature
 * @param topP           nucleus mass
 * @param topK           top-k ({@code -1}/{@code 0}: off)
 * @param seed           the request's seed, or null
 * @param stop           stop strings
 * @param stopTokenIds   stop token ids (vLLM's {@code stop_token_ids})
 * @param logprobs       top logprobs per token, {@code -1}: none
 * @param stream         answer as SSE
 * @param includeUsage   {@code stream_options.include_usage}
 * @param returnTokenIds vLLM's {@code return_token_ids}
 * @param ignoreEos      keep going after EOS
 * @param numDrafts      drafts per step from {@code speculative}, or null for the server's default
 * @param strategy       {@code rollback_strategy} pin, or null
 */
public record ApiRequest(boolean chat, String model, int[] promptIds, String promptText, List<ChatMessage> messages,
                         Integer maxTokens, double temperature, double topP, int topK, Long seed, List<String> stop,
                         List<Integer> stopTokenIds, int logprobs, boolean stream, boolean includeUsage,
                         boolean returnTokenIds, boolean ignoreEos, Integer numDrafts, String strategy) {
}
