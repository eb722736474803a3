package dev.hyspec.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.Sequence;
import dev.hyspec.sampling.TokenLogprob;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Logprobs a request asks for equal {@code log_softmax} of a from-scratch recompute's logits at each
 * generated position — also for tokens accepted from drafts — and the per-request stats count the
 * drafts the request's rows verified.
 */
class LogprobsAndStatsTest {
    private static final int K = 4;
    private static final int N = 24;

    @TestFactory
    Stream<DynamicTest> logprobsOfAcceptedDraftsEqualTheRecompute() {
        List<DynamicTest> tests = new ArrayList<>();
        for (String name : List.of("nemotron_h", "qwen3_next")) {
            for (String strategy : EngineHarness.STRATEGIES) {
                tests.add(DynamicTest.dynamicTest(name + " / " + strategy, () -> check(name, strategy)));
            }
        }
        return tests.stream();
    }

    private static void check(String name, String strategy) {
        HybridModel model = EngineHarness.model(EngineHarness.fixture(name));
        int vocab = model.config().vocabSize();
        EngineCore core = EngineHarness.engine(model,
                EngineOptions.defaults().withDrafts(K).withStrategy(strategy, Map.of()));
        int[] prompt = EngineHarness.repetitivePrompt(20, 5, 7, vocab);
        int[] reference = EngineHarness.referenceGreedy(model, prompt, N);
        GenerationRequest r = GenerationRequest.of("lp", prompt, EngineHarness.greedy(N))
                .withDrafter(EngineHarness.noisyOracle(reference, prompt.length, vocab, 3), K).withLogprobs(3);
        EngineHarness.Collector c = EngineHarness.run(core, List.of(r)).get("lp");
        assertArrayEquals(reference, c.output());
        assertEquals(N, c.logprobs.size());

        // the reference: logits of the whole sequence in one from-scratch pass
        int[] all = EngineHarness.concat(prompt, reference);
        Backend backend = model.backend();
        float[] logits;
        try (Sequence seq = model.newSequence(all.length)) {
            logits = backend.download(seq.forward(all, true));
        }
        for (int i = 0; i < N; i++) {
            float[] row = java.util.Arrays.copyOfRange(logits, (prompt.length - 1 + i) * vocab,
                    (prompt.length + i) * vocab);
            double max = Double.NEGATIVE_INFINITY;
            for (float v : row) {
                max = Math.max(max, v);
            }
            double z = 0;
            for (float v : row) {
                z += Math.exp(v - max);
            }
            double logZ = max + Math.log(z);
            TokenLogprob lp = c.logprobs.get(i);
            assertEquals(reference[i], lp.token());
            assertEquals(row[reference[i]] - logZ, lp.logprob(), 1e-3, "token " + i);
            assertEquals(3, lp.topIds().length);
            assertEquals(reference[i], lp.topIds()[0], "greedy token is the most likely one");
            for (int k = 0; k < 3; k++) {
                assertEquals(row[lp.topIds()[k]] - logZ, lp.topLogprobs()[k], 1e-3);
                if (k > 0) {
                    assertTrue(lp.topLogprobs()[k] <= lp.topLogprobs()[k - 1]);
                }
            }
        }
        RequestStats stats = c.stats;
        assertEquals(strategy, stats.strategy());
        assertEquals(prompt.length, stats.promptTokens());
        assertEquals(N, stats.outputTokens());
        EngineMetrics.StrategyStats engineStats = core.metrics().strategies.get(strategy);
        assertEquals(engineStats.draftTokens, stats.draftTokens());
        assertEquals(engineStats.acceptedDraftTokens, stats.acceptedDraftTokens());
        assertTrue(stats.acceptedDraftTokens() > 0 && stats.acceptedDraftTokens() < stats.draftTokens(),
                "the noisy drafter gets some drafts accepted and some rejected");
    }

    @TestFactory
    Stream<DynamicTest> noLogprobsUnlessAsked() {
        return Stream.of(DynamicTest.dynamicTest("nemotron_h", () -> {
            HybridModel model = EngineHarness.model(EngineHarness.fixture("nemotron_h"));
            EngineCore core = EngineHarness.engine(model, EngineOptions.defaults());
            EngineHarness.Collector c = EngineHarness.run(core,
                    List.of(GenerationRequest.of("x", new int[] {5, 6, 7}, EngineHarness.greedy(4)))).get("x");
            assertEquals(0, c.logprobs.size());
            assertNull(c.error);
            assertEquals(4, c.stats.outputTokens());
        }));
    }
}
