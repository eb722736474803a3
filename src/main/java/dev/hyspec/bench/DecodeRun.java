package dev.hyspec.bench;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cuda.CudaBackend;
import dev.hyspec.backend.cuda.HostProfile;
import dev.hyspec.engine.EngineCore;
import dev.hyspec.engine.EngineMetrics;
import dev.hyspec.engine.EngineObserver;
import dev.hyspec.engine.EngineOptions;
import dev.hyspec.engine.FinishReason;
import dev.hyspec.engine.GenerationRequest;
import dev.hyspec.engine.RequestStats;
import dev.hyspec.engine.TokenSink;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.sampling.SamplingParams;
import dev.hyspec.sampling.TokenLogprob;
import dev.hyspec.spec.Drafter;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.ReplayStrategy;
import dev.hyspec.state.RollbackStrategy;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * One measured configuration of {@link DecodeBench}: {@code batch} greedy requests with repetitive
 * prompts (a random phrase per request, repeated) run through an {@link EngineCore} until every one
 * has its {@code maxTokens}. Only steps without a prefill row count: the decode phase's generated
 * tokens over its wall time, and the mean step time with where it went.
 *
 * <p>Drafts come from the engine's n-gram drafter, or, given the requests' greedy continuations
 * (the outputs of a no-spec run of the same prompts), from an oracle that proposes them: greedy
 * decoding is lossless, so those are the drafts a perfect drafter makes. A model with random
 * weights does not continue the repetition of its prompt, so the n-gram drafter rarely finds a
 * match there; the oracle measures the verify and rollback path at full acceptance. (Where a
 * backend rounds verify rows differently from plain decode rows — bf16 tensor-core matmuls above
 * 8 tokens per step, say — near-tied logits of a random model can part the two outputs, and the
 * acceptance then falls below 1: it is measured, not assumed.)
 */
final class DecodeRun {
    private static final int PAGE_SIZE = 16;
    private static final int PREFILL_BUDGET = 2048;

    /** A decoding mode: no drafts, or n-gram drafts verified under a rollback strategy. */
    record Mode(String name, String strategy, int numDrafts) {
        static final Mode NO_SPEC = new Mode("no-spec", ReplayStrategy.ID, 0);

        static Mode spec(String strategy, int k) {
            return new Mode(strategy, strategy, k);
        }
    }

    /**
     * Sizes of the requests. {@code texts}, when not null, are token sequences of real text: request
     * r repeats a {@code phraseTokens} window of text {@code r % texts.length} instead of random ids.
     */
    record Workload(int promptTokens, int phraseTokens, int maxTokens, int[][] texts) {
        Workload(int promptTokens, int phraseTokens, int maxTokens) {
            this(promptTokens, phraseTokens, maxTokens, null);
        }

        Workload withTexts(int[][] texts) {
            return new Workload(promptTokens, phraseTokens, maxTokens, texts);
        }
    }

    /**
     * What a configuration measured. Per decode step (means): {@code stepMs} in all,
     * {@code forwardMs} in the model's forward with the logits' download, {@code commitMs} in the
     * rollback commits, {@code hostMs} the rest (scheduling, drafting, verification, output).
     * {@code graphs}: captured, replayed, eager, abandoned step recordings during the decode phase.
     */
    record Measured(int decodeSteps, long decodeTokens, double tokensPerSecond, double stepMs, double forwardMs,
                    double commitMs, double hostMs, double acceptanceRate, double draftsPerRow, long[] graphs,
                    int[][] outputs) {}

    private DecodeRun() {}

    /**
     * @param continuations per request, its greedy continuation for the oracle drafter; null: the
     *                      engine's n-gram drafter
     */
    static Measured run(HybridModel model, int batch, Mode mode, Workload w, long seed, int[][] continuations) {
        return run(model, batch, mode, w, seed, continuations, false);
    }

    /**
     * @param forceAcceptance every draft is accepted whatever the argmax
     *                        ({@link EngineCore#forceDraftAcceptance}): the spec path's cost at full
     *                        acceptance, independent of whether verify-shaped kernels reproduce the
     *                        decode-shaped kernels' greedy tokens bit for bit
     */
    static Measured run(HybridModel model, int batch, Mode mode, Workload w, long seed, int[][] continuations,
                        boolean forceAcceptance) {
        return run(model, batch, mode, w, seed, continuations, forceAcceptance ? 1.0 : -1.0, null);
    }

    /**
     * @param forcedRate  at or above 0: drafts are accepted at this rate whatever the argmax
     *                    ({@link EngineCore#forceDraftAcceptance(double, long)}, draws seeded by
     *                    {@code seed}); negative: the target's greedy tokens decide
     * @param hostProfile when not null, told where each step begins and ends ({@link HostProfile})
     */
    static Measured run(HybridModel model, int batch, Mode mode, Workload w, long seed, int[][] continuations,
                        double forcedRate, HostProfile hostProfile) {
        int maxLen = w.promptTokens() + w.maxTokens() + mode.numDrafts() + 1;
        int pagesPerRequest = (maxLen + PAGE_SIZE - 1) / PAGE_SIZE;
        EngineOptions options = new EngineOptions(batch, Math.max(PREFILL_BUDGET, batch * (mode.numDrafts() + 1)),
                maxLen, batch, PAGE_SIZE, batch * pagesPerRequest, mode.numDrafts(), 2, 4, mode.strategy(), Map.of(),
                false, PAGE_SIZE, null);
        Map<String, RollbackStrategy> strategies = new LinkedHashMap<>();
        strategies.put(ReplayStrategy.ID, new ReplayStrategy());
        strategies.put(IntermediateCopyStrategy.ID, new IntermediateCopyStrategy());
        Backend backend = model.backend();
        try (EngineCore core = new EngineCore(model, options, strategies)) {
            core.forceDraftAcceptance(forcedRate, seed);
            long[] commitNanos = new long[1];
            core.setObserver(new EngineObserver() {
                @Override
                public void onVerified(String strategy, int drafts, int accepted, long nanos) {
                    commitNanos[0] += nanos;
                }
            });
            long[] generated = new long[1];
            Output[] outputs = new Output[batch];
            Random rnd = new Random(seed);
            int vocab = model.config().vocabSize();
            SamplingParams greedy = new SamplingParams(0.0, 1.0, 0, null, w.maxTokens(), List.of(), true);
            for (int r = 0; r < batch; r++) {
                int[] prompt = w.texts() == null ? repetitivePrompt(rnd, w, vocab) : textPrompt(w, r);
                GenerationRequest request = GenerationRequest.of("bench-" + r, prompt, greedy);
                if (continuations != null && mode.numDrafts() > 0) {
                    request = request.withDrafter(oracle(w.promptTokens(), continuations[r]), mode.numDrafts());
                }
                outputs[r] = new Output(w.maxTokens(), generated);
                core.add(request, outputs[r]);
            }
            int steps = 0;
            long stepNanos = 0;
            long forwardNanos = 0;
            long commitTotal = 0;
            long tokens = 0;
            long[] graphs0 = graphCounts(backend);
            long[] graphsDecode = new long[4];
            while (core.hasWork()) {
                long tokens0 = generated[0];
                long commit0 = commitNanos[0];
                long generate0 = generateNanos(core.metrics(), mode.strategy());
                if (hostProfile != null) {
                    hostProfile.stepBegin();
                }
                long t0 = System.nanoTime();
                core.step();
                long elapsed = System.nanoTime() - t0;
                boolean prefill = core.lastStep().stream().anyMatch(row -> row.mode() == RowMode.PREFILL);
                if (hostProfile != null) {
                    hostProfile.stepEnd(!prefill);
                }
                long[] graphs1 = graphCounts(backend);
                if (!prefill) {
                    steps++;
                    stepNanos += elapsed;
                    tokens += generated[0] - tokens0;
                    long commit = commitNanos[0] - commit0;
                    commitTotal += commit;
                    // the strategy's generate time is the forward (shared by its rows) plus its commits
                    forwardNanos += generateNanos(core.metrics(), mode.strategy()) - generate0 - commit;
                    for (int i = 0; i < 4; i++) {
                        graphsDecode[i] += graphs1[i] - graphs0[i];
                    }
                }
                graphs0 = graphs1;
            }
            int[][] out = new int[batch][];
            for (int r = 0; r < batch; r++) {
                if (outputs[r].failure != null) {
                    throw new IllegalStateException("request " + r + " of " + batch + " did not finish by length: "
                            + outputs[r].failure);
                }
                out[r] = outputs[r].tokens;
            }
            EngineMetrics.StrategyStats stats = core.metrics().strategies.get(mode.strategy());
            double ms = 1e-6 / Math.max(steps, 1);
            return new Measured(steps, tokens, tokens / (stepNanos / 1e9), stepNanos * ms, forwardNanos * ms,
                    commitTotal * ms, (stepNanos - forwardNanos - commitTotal) * ms,
                    stats == null ? 0 : stats.acceptanceRate(),
                    stats == null ? 0 : (double) stats.draftTokens / Math.max(1, stats.generateRows), graphsDecode, out);
        }
    }

    /** A random phrase of {@code phraseTokens} ids (avoiding the low special ids), repeated to the prompt length. */
    static int[] repetitivePrompt(Random rnd, Workload w, int vocab) {
        int[] phrase = rnd.ints(w.phraseTokens(), 3, vocab).toArray();
        int[] prompt = new int[w.promptTokens()];
        for (int i = 0; i < prompt.length; i++) {
            prompt[i] = phrase[i % phrase.length];
        }
        return prompt;
    }

    /**
     * Request r's prompt of real text: a {@code phraseTokens} window of text {@code r % texts}
     * (starting further in for later requests on the same text), repeated to the prompt length.
     */
    static int[] textPrompt(Workload w, int r) {
        int[] text = w.texts()[r % w.texts().length];
        int room = text.length - w.phraseTokens();
        if (room < 0) {
            throw new IllegalArgumentException("a text of " + text.length + " tokens has no phrase of "
                    + w.phraseTokens());
        }
        int from = room == 0 ? 0 : (r / w.texts().length * 5) % (room + 1);
        int[] prompt = new int[w.promptTokens()];
        for (int i = 0; i < prompt.length; i++) {
            prompt[i] = text[from + i % w.phraseTokens()];
        }
        return prompt;
    }

    /**
     * Milliseconds to download logits {@code [rows, vocab]} to the host, as the engine does after
     * every step (a separate measurement, for the step-time breakdown).
     */
    static double logitsDownloadMs(Backend backend, int rows, int vocab) {
        Tensor logits = backend.zeros(rows, vocab);
        try {
            backend.download(logits);
            int reps = 5;
            long t0 = System.nanoTime();
            for (int i = 0; i < reps; i++) {
                backend.download(logits);
            }
            return (System.nanoTime() - t0) / 1e6 / reps;
        } finally {
            backend.free(logits);
        }
    }

    private static long generateNanos(EngineMetrics m, String strategy) {
        EngineMetrics.StrategyStats s = m.strategies.get(strategy);
        return s == null ? 0 : s.generateNanos;
    }

    private static long[] graphCounts(Backend backend) {
        return backend instanceof CudaBackend cuda ? cuda.graphCounts() : new long[4];
    }

    /**
     * The drafts a perfect drafter makes: the next tokens of the request's known greedy
     * continuation (none past its end).
     */
    static Drafter oracle(int promptLength, int[] continuation) {
        return (tokens, length, numDrafts) -> {
            int from = length - promptLength;
            int to = Math.min(continuation.length, from + numDrafts);
            return from >= 0 && from < to ? Arrays.copyOfRange(continuation, from, to) : new int[0];
        };
    }

    /** One request's output; adds its tokens to a shared count, and notes an end other than by length. */
    private static final class Output implements TokenSink {
        final int[] tokens;
        private final long[] total;
        int length;
        String failure;

        Output(int maxTokens, long[] total) {
            this.tokens = new int[maxTokens];
            this.total = total;
        }

        @Override
        public void onTokens(int[] t, TokenLogprob[] logprobs) {
            System.arraycopy(t, 0, tokens, length, t.length);
            length += t.length;
            total[0] += t.length;
        }

        @Override
        public void onFinish(FinishReason reason, String message, RequestStats stats) {
            if (reason != FinishReason.LENGTH || length != tokens.length) {
                failure = reason + " after " + length + " tokens" + (message == null ? "" : ": " + message);
            }
        }
    }
}
