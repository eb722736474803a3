package dev.hyspec.engine;

import dev.hyspec.backend.Backend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.Sequence;
import dev.hyspec.sampling.Sampler;
import dev.hyspec.sampling.SamplingParams;
import dev.hyspec.sampling.TokenLogprob;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.ReplayStrategy;
import dev.hyspec.state.RollbackStrategy;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.StateAssertions;
import dev.hyspec.testing.TestBackends;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Shared pieces of the engine tests: models, both strategies, a collecting sink, and the
 * from-scratch references — a fresh {@link Sequence} that prefills the tokens in one go and decodes
 * one token at a time with no drafts, no pool reuse and no rollback strategy involved.
 */
final class EngineHarness {
    static final List<String> STRATEGIES = List.of(ReplayStrategy.ID, IntermediateCopyStrategy.ID);
    private static final Map<String, HybridModel> MODELS = new ConcurrentHashMap<>();

    private EngineHarness() {}

    static HybridModel model(Fixture f) {
        return MODELS.computeIfAbsent(f.dir().toString(), k -> HybridModel.load(Checkpoint.open(f.dir()), TestBackends.create()));
    }

    /** The reference fixtures with recurrent layers (all of them). */
    static List<Fixture> fixtures() {
        return Fixtures.all();
    }

    static Map<String, RollbackStrategy> strategies() {
        Map<String, RollbackStrategy> m = new LinkedHashMap<>();
        m.put(ReplayStrategy.ID, new ReplayStrategy());
        m.put(IntermediateCopyStrategy.ID, new IntermediateCopyStrategy());
        return m;
    }

    static EngineCore engine(HybridModel model, EngineOptions options) {
        return new EngineCore(model, options, strategies());
    }

    /** Greedy, never stopping at EOS, exactly {@code n} tokens. */
    static SamplingParams greedy(int n) {
        return new SamplingParams(0.0, 1.0, 0, null, n, List.of(), true);
    }

    /** Collects what the engine sends one request. */
    static final class Collector implements TokenSink {
        final List<Integer> tokens = new ArrayList<>();
        final List<TokenLogprob> logprobs = new ArrayList<>();
        FinishReason reason;
        String error;
        RequestStats stats;
        int events;

        @Override
        public void onTokens(int[] t, TokenLogprob[] lp) {
            if (reason != null) {
                throw new AssertionError("tokens after finish");
            }
            for (int x : t) {
                tokens.add(x);
            }
            if (lp != null) {
                logprobs.addAll(List.of(lp));
            }
            events++;
        }

        @Override
        public void onFinish(FinishReason r, String message, RequestStats s) {
            if (reason != null) {
                throw new AssertionError("finished twice");
            }
            reason = r;
            error = message;
            stats = s;
        }

        int[] output() {
            return tokens.stream().mapToInt(Integer::intValue).toArray();
        }
    }

    /** Adds the requests and steps until the engine is idle. */
    static Map<String, Collector> run(EngineCore core, List<GenerationRequest> requests) {
        Map<String, Collector> out = new LinkedHashMap<>();
        for (GenerationRequest r : requests) {
            Collector c = new Collector();
            out.put(r.id(), c);
            core.add(r, c);
        }
        drain(core);
        return out;
    }

    static void drain(EngineCore core) {
        int guard = 0;
        while (core.hasWork()) {
            core.step();
            if (++guard > 100_000) {
                throw new AssertionError("engine did not finish");
            }
        }
    }

    /** Greedy continuation of {@code prompt} by the from-scratch reference, {@code n} tokens. */
    static int[] referenceGreedy(HybridModel model, int[] prompt, int n) {
        int[] out = new int[n];
        Backend backend = model.backend();
        try (Sequence seq = model.newSequence(prompt.length + n)) {
            float[] logits = backend.download(seq.forward(prompt, false));
            for (int i = 0; i < n; i++) {
                out[i] = Sampler.argmax(logits);
                if (i + 1 < n) {
                    logits = backend.download(seq.forward(new int[] {out[i]}, false));
                }
            }
        }
        return out;
    }

    /**
     * A drafter that proposes the reference continuation with about a third of the tokens replaced
     * by wrong ones (seeded): the verifier then accepts every count from none to all over a run. It
     * knows nothing the verifier uses; a lossless engine's output does not depend on it.
     */
    static dev.hyspec.spec.Drafter noisyOracle(int[] reference, int promptLength, int vocab, long seed) {
        java.util.Random rnd = new java.util.Random(seed);
        return (tokens, length, numDrafts) -> {
            int p = length - promptLength;
            int d = Math.max(0, Math.min(numDrafts, reference.length - p));
            int[] drafts = Arrays.copyOfRange(reference, p, p + d);
            for (int i = 0; i < d; i++) {
                if (rnd.nextInt(3) == 0) {
                    drafts[i] = (drafts[i] + 1 + rnd.nextInt(vocab - 1)) % vocab;
                }
            }
            return drafts;
        };
    }

    /** Prompt of {@code n} tokens: a few random tokens, repeated, so the n-gram drafter finds matches. */
    static int[] repetitivePrompt(int n, int period, long seed, int vocab) {
        java.util.Random rnd = new java.util.Random(seed);
        int[] motif = rnd.ints(period, 3, vocab).toArray();
        int[] p = new int[n];
        for (int i = 0; i < n; i++) {
            p[i] = motif[i % period];
        }
        return p;
    }

    static int[] concat(int[] a, int[] b) {
        int[] c = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    static void assertStateEqualsRecompute(HybridModel model, MambaStatePool pool, int slot, int[] tokens, String what) {
        StateAssertions.assertStateEqualsRecompute(model, pool, slot, tokens, what);
    }

    static Fixture fixture(String name) {
        return Fixtures.named(name);
    }
}
