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

    /**
     * Compute backend: {@code auto} (CUDA when a device and the built kernels are present, else the
     * CPU; the choice is logged), {@code cpu} (the pure-Java reference) or {@code cuda} (fails at
     * startup, saying why, when no device can be used).
     */
    @WithDefault("auto")
    String backend();

    /**
     * Element type of matmul activations on the cuda backend: {@code bfloat16} (tensor cores for
     * prefill-shaped products), {@code float32} (exact against the CPU reference), or {@code auto}:
     * bfloat16 on cuda, float32 on cpu, which computes in float32 only.
     */
    @WithName("activation-dtype")
    @WithDefault("auto")
    String activationDtype();

    Scheduler scheduler();

    /**
     * Element type of the recurrent state: {@code float32} (the default), {@code bfloat16} or
     * {@code float16}. The cpu backend keeps float32 state only.
     */
    @WithName("state-dtype")
    @WithDefault("float32")
    String stateDtype();

    /** How long graceful shutdown lets running requests finish before aborting them. */
    @WithName("drain-timeout")
    @WithDefault("30s")
    java.time.Duration drainTimeout();

    @WithName("state-pool")
    StatePool statePool();

    @WithName("kv-cache")
    KvCache kvCache();

    Spec spec();

    Rollback rollback();

    @WithName("prefix-cache")
    PrefixCache prefixCache();

    /** Scheduler limits (vLLM's names). */
    interface Scheduler {
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

        /** Most requests waiting for admission; beyond it the API answers 503 with {@code Retry-After}. */
        @WithName("max-waiting")
        @WithDefault("256")
        int maxWaiting();
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

    interface Spec {
        /** The default drafter: {@code ngram} (prompt lookup) or {@code none}. */
        @WithDefault("ngram")
        String method();

        /** Draft tokens proposed per step (K). */
        @WithName("num-tokens")
        @WithDefault("4")
        int numTokens();

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
        /**
         * A Hugging Face checkpoint folder to serve; default (unset): the embedded model
         * {@code models/kjv-hybrid}, looked up in the working directory and above the application's jar.
         */
        Optional<Path> path();

        /** The id clients use for the model; default: the checkpoint folder's name. */
        Optional<String> name();
    }
}
