package dev.hyspec.engine;

import dev.hyspec.sampling.RandomSource;
import dev.hyspec.spec.Drafter;
import dev.hyspec.state.RollbackStrategy;
import java.util.Arrays;

/**
 * The engine's bookkeeping for one request (vLLM's {@code Request}): every token so far (prompt then
 * output), how many of them the state holds ({@code numComputedTokens}), and what it holds in the pools.
 */
final class RequestState {
    final GenerationRequest request;
    final TokenSink sink;
    final long arrival;
    final RollbackStrategy strategy;
    final RandomSource rng;
    final Drafter drafter;
    final int numDrafts;
    final int promptLength;

    int[] tokens;
    int length;
    int numComputedTokens;
    int prefillEnd;                 // tokens [0, prefillEnd) are consumed by prefill chunks
    int numOutput;
    int slot = -1;
    int[] pages = new int[0];
    PrefixCache.Block cachedTail;   // the deepest cached block on this sequence's own chain
    int cachedPromptTokens;         // prompt tokens the first admission took from the prefix cache
    long draftTokens;
    long acceptedDraftTokens;

    // this step
    int[] drafts = new int[0];

    RequestState(GenerationRequest request, TokenSink sink, long arrival, RollbackStrategy strategy, Drafter drafter,
                 int numDrafts) {
        this.request = request;
        this.sink = sink;
        this.arrival = arrival;
        this.strategy = strategy;
        this.rng = RandomSource.forParams(request.sampling());
        this.drafter = drafter;
        this.numDrafts = numDrafts;
        this.promptLength = request.prompt().length;
        this.tokens = Arrays.copyOf(request.prompt(), Math.max(16, 2 * promptLength));
        this.length = promptLength;
        this.prefillEnd = promptLength;
    }

    String id() {
        return request.id();
    }

    RequestStats stats() {
        return new RequestStats(strategy.id(), promptLength, cachedPromptTokens, numOutput, draftTokens,
                acceptedDraftTokens);
    }

    /** Still consuming tokens it already knows (the prompt, or everything after a preemption). */
    boolean prefilling() {
        return numComputedTokens < prefillEnd;
    }

    /**
     * Back to the start (preemption by recompute): everything known is prefilled again — except,
     * once it has output, the last sampled token, which the next generate row feeds as before. The
     * request then draws its random numbers and drafts exactly as it would have without the preemption.
     */
    void restart() {
        numComputedTokens = 0;
        prefillEnd = numOutput > 0 ? length - 1 : length;
        slot = -1;
        pages = new int[0];
        cachedTail = null;
    }

    /** vLLM's {@code num_tokens_with_spec}: the known tokens plus this step's drafts. */
    int numTokensWithSpec() {
        return length + drafts.length;
    }

    void append(int token) {
        if (length == tokens.length) {
            tokens = Arrays.copyOf(tokens, 2 * tokens.length);
        }
        tokens[length++] = token;
        numOutput++;
    }
}
