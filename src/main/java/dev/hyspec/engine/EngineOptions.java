package dev.hyspec.engine;

import dev.hyspec.state.LayoutPolicy;
import java.util.Map;

/**
 * The engine's sizes and policies (the {@code hyspec.scheduler.*}, {@code hyspec.spec.*},
 * {@code hyspec.rollback.*}, {@code hyspec.prefix-cache.*} and {@code hyspec.state-pool.*} keys).
 *
 * @param maxNumSeqs          most requests running at once (vLLM {@code max_num_seqs})
 * @param maxNumBatchedTokens token budget of one step (vLLM {@code max_num_batched_tokens})
 * @param maxModelLen         longest sequence, prompt plus output
 * @param stateSlots          slots of the recurrent state pool (running requests and prefix checkpoints)
 * @param pageSize            attention KV page size in tokens
 * @param kvPages             KV pages per attention layer
 * @param numDrafts           drafts per step for requests that speculate (0: no speculation)
 * @param ngramMin            smallest n-gram the default drafter matches
 * @param ngramMax            largest n-gram the default drafter matches
 * @param defaultStrategy     rollback strategy when neither the request nor the A/B split picks one
 * @param abWeights           A/B split of strategies by weight (empty: always the default)
 * @param prefixCaching       prefix caching on or off
 * @param prefixBlockSize     the "align" block size B (a multiple of {@code pageSize})
 * @param layouts             state layout for prefill and for generate rows, or null for the model's natural one
 */
public record EngineOptions(int maxNumSeqs, int maxNumBatchedTokens, int maxModelLen, int stateSlots, int pageSize,
                            int kvPages, int numDrafts, int ngramMin, int ngramMax, String defaultStrategy,
                            Map<String, Integer> abWeights, boolean prefixCaching, int prefixBlockSize,
                            LayoutPolicy layouts) {

    public EngineOptions {
        abWeights = Map.copyOf(abWeights);
        require(maxNumSeqs >= 1, "max-num-seqs must be at least 1");
        require(maxNumBatchedTokens >= 1 + numDrafts, "max-num-batched-tokens must hold at least one verify row");
        require(maxModelLen >= 2, "max-model-len must be at least 2");
        require(stateSlots >= maxNumSeqs, "state-pool slots must be at least max-num-seqs");
        require(pageSize >= 1 && kvPages >= 1, "KV page size and page count must be positive");
        require(numDrafts >= 0, "num-drafts must not be negative");
        require(ngramMin >= 1 && ngramMax >= ngramMin, "n-gram sizes must satisfy 1 <= min <= max");
        require(prefixBlockSize >= pageSize && prefixBlockSize % pageSize == 0,
                "prefix-cache block size must be a multiple of the KV page size");
    }

    private static void require(boolean ok, String message) {
        if (!ok) {
            throw new IllegalArgumentException(message);
        }
    }

    /** Small defaults suited to the CPU backend and tests. */
    public static EngineOptions defaults() {
        return new EngineOptions(16, 512, 4096, 48, 16, 2048, 4, 2, 4, "replay", Map.of(), true, 32, null);
    }

    public EngineOptions withDrafts(int k) {
        return new EngineOptions(maxNumSeqs, Math.max(maxNumBatchedTokens, k + 1), maxModelLen, stateSlots, pageSize,
                kvPages, k, ngramMin, ngramMax, defaultStrategy, abWeights, prefixCaching, prefixBlockSize, layouts);
    }

    public EngineOptions withBudget(int seqs, int tokens) {
        return new EngineOptions(seqs, tokens, maxModelLen, Math.max(stateSlots, seqs), pageSize, kvPages, numDrafts,
                ngramMin, ngramMax, defaultStrategy, abWeights, prefixCaching, prefixBlockSize, layouts);
    }

    public EngineOptions withPools(int slots, int pages) {
        return new EngineOptions(maxNumSeqs, maxNumBatchedTokens, maxModelLen, slots, pageSize, pages, numDrafts,
                ngramMin, ngramMax, defaultStrategy, abWeights, prefixCaching, prefixBlockSize, layouts);
    }

    public EngineOptions withStrategy(String strategy, Map<String, Integer> ab) {
        return new EngineOptions(maxNumSeqs, maxNumBatchedTokens, maxModelLen, stateSlots, pageSize, kvPages,
                numDrafts, ngramMin, ngramMax, strategy, ab, prefixCaching, prefixBlockSize, layouts);
    }

    public EngineOptions withPrefixCache(boolean on, int blockSize) {
        return new EngineOptions(maxNumSeqs, maxNumBatchedTokens, maxModelLen, stateSlots, pageSize, kvPages,
                numDrafts, ngramMin, ngramMax, defaultStrategy, abWeights, on, blockSize, layouts);
    }

    public EngineOptions withLayouts(LayoutPolicy policy) {
        return new EngineOptions(maxNumSeqs, maxNumBatchedTokens, maxModelLen, stateSlots, pageSize, kvPages,
                numDrafts, ngramMin, ngramMax, defaultStrategy, abWeights, prefixCaching, prefixBlockSize, policy);
    }
}
