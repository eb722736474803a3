package dev.hyspec.config;

import io.smallrye.config.ConfigMapping;
import dev.hyspec.backend.StateLayout;
import io.smallrye.config.WithDefault;
import io.smallrye.config.WithName;
import java.nio.file.Path;
import java.util.Optional;

/** hyspec's configuration, every key under {@code hyspec.*} (see the README's table). */
@ConfigMapping(prefix = "hyspec")
public interface HyspecConfig {

    Model model();

    /** Compute backend: {@code cpu} (the pure-Java reference). */
    @WithDefault("cpu")
    String backend();

    EngineLimits engine();

    @WithName("state-pool")
    StatePool statePool();

    @WithName("kv-cache")
    KvCache kvCache();

    Speculative speculative();

    Rollback rollback();

    @WithName("prefix-cache")
    PrefixCache prefixCache();

    /** Scheduler limits (vLLM's names). */
    interface EngineLimits {
        /** Most requests running at once. */
        @WithName("max-num-seqs")
        @WithDefault("16")
        int maxNumSeqs();

        /** Token budget of one step (prefill chunks, decodes and drafts together). */
        @WithName("max-num-batched-tokens")
        @WithDefault("512")
        int maxNumBatchedTokens();

        /** Longest sequence, prompt plus output. */
        @WithName("max-model-len")
        @WithDefault("4096")
        int maxModelLen();
    }

    interface StatePool {
        /** Recurrent-state slots: running requests plus prefix-cache checkpoints. */
        @WithDefault("48")
        int slots();

        /** State layout prefill chunks run in ({@code KV} or {@code VK}); default: the model's natural one. */
        @WithName("prefill-layout")
        Optional<StateLayout> prefillLayout();

        /** State layout decode and verify rows run in; default: the model's natural one. */
        @WithName("decode-layout")
        Optional<StateLayout> decodeLayout();
    }

    interface KvCache {
        /** Positions per KV page. */
        @WithName("page-size")
        @WithDefault("16")
        int pageSize();

        /** KV pages per attention layer. */
        @WithDefault("2048")
        int pages();
    }

    interface Speculative {
        /** Drafts proposed per step (0 turns speculative decoding off). */
        @WithName("num-drafts")
        @WithDefault("4")
        int numDrafts();

        /** Smallest n-gram the prompt-lookup drafter matches. */
        @WithName("ngram-min")
        @WithDefault("2")
        int ngramMin();

        /** Largest n-gram the prompt-lookup drafter matches. */
        @WithName("ngram-max")
        @WithDefault("4")
        int ngramMax();
    }

    interface Rollback {
        /** The default rollback strategy: {@code replay} or {@code intermediate-copy}. */
        @WithDefault("replay")
        String strategy();

        /** A/B split by weight, e.g. {@code replay=90,intermediate-copy=10}; sticky per request. */
        Optional<String> ab();
    }

    interface PrefixCache {
        @WithDefault("true")
        boolean enabled();

        /** The "align" block size: recurrent state is checkpointed every this many tokens. */
        @WithName("block-size")
        @WithDefault("32")
        int blockSize();
    }

    interface Model {
        /** A Hugging Face checkpoint folder to serve. */
        Optional<Path> path();

        /** The id clients use for the model; default: the checkpoint folder's name. */
        Optional<String> name();
    }
}
