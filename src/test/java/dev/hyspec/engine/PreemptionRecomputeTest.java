package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.model.HybridModel;
import dev.hyspec.sampling.SamplingParams;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 6: with a KV pool far too small for the running requests (page size 16), the
 * newest running request is preempted and later recomputed from its tokens. Every greedy output
 * (noisy-oracle, all-correct-oracle, n-gram and no drafts) equals its cold reference, and a sampled
 * request (temperature 0.8, seed 42, fixed length) produces the same tokens as in a roomy engine
 * where it is never preempted. Both strategies, prefix cache off and on. Only fixtures with attention
 * layers: preemption is triggered by KV pages, which a pure Mamba2 model does not use.
 *
 * <p>The sampled request speculates with a deterministic drafter (it proposes the last K tokens of
 * its history), so its random draws depend on how its steps split into verify rows. A recompute
 * prefills everything but the last sampled token and then resumes with the same generate rows, so the
 * draws, and therefore the tokens, repeat exactly.
 */
class PreemptionRecomputeTest {
    private static final int K = 4;
    private static final int OUTPUT = 60;
    private static final int SAMPLED_OUTPUT = 50;
    /** Proposes the last {@code numDrafts} tokens of the history again: stateless and deterministic. */
    private static final dev.hyspec.spec.Drafter REPEAT_LAST = (tokens, length, numDrafts) ->
            Arrays.copyOfRange(tokens, Math.max(0, length - numDrafts), length);
    private static final int PAGES = 10;

    @TestFactory
    Stream<DynamicTest> preemptedRequestsResumeByRecomputeWithIdenticalOutput() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            if (EngineHarness.model(f).kvWidths().length == 0) {
                continue;
            }
            for (String strategy : EngineHarness.STRATEGIES) {
                for (boolean cache : new boolean[] {false, true}) {
                    tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy + (cache ? " / prefix cache" : ""),
                            () -> check(f, strategy, cache)));
                }
            }
        }
        return tests.stream();
    }

    static SamplingParams sampled(int n) {
        return new SamplingParams(0.8, 1.0, 0, 42L, n, List.of(), true);
    }

    private static EngineOptions options(String strategy, boolean cache, int pages) {
        return EngineOptions.defaults().withDrafts(K).withBudget(4, 64).withPools(4, pages)
                .withStrategy(strategy, Map.of()).withPrefixCache(cache, 16);
    }

    private static void check(Fixture f, String strategy, boolean cache) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        String what = f.name() + " / " + strategy + (cache ? " / prefix cache" : "");
        assertEquals(16, options(strategy, cache, PAGES).pageSize(), "page size");
        Random rnd = new Random(9);
        Map<String, int[]> prompts = new LinkedHashMap<>();
        prompts.put("noisy", rnd.ints(12, 3, vocab).toArray());
        prompts.put("ngram", EngineHarness.repetitivePrompt(20, 5, 4, vocab));
        prompts.put("plain", rnd.ints(28, 3, vocab).toArray());
        prompts.put("oracle", rnd.ints(9, 3, vocab).toArray());
        int[] sampledPrompt = rnd.ints(15, 3, vocab).toArray();
        Map<String, int[]> want = new LinkedHashMap<>();
        prompts.forEach((id, p) -> want.put(id, EngineHarness.referenceGreedy(model, p, OUTPUT)));

        // the sampled request alone in a roomy engine: never preempted
        EngineCore roomy = EngineHarness.engine(model, options(strategy, cache, 2048));
        EngineHarness.Collector alone = EngineHarness.run(roomy,
                List.of(GenerationRequest.of("sampled", sampledPrompt, sampled(SAMPLED_OUTPUT)).withDrafter(REPEAT_LAST, K)))
                .get("sampled");
        assertEquals(FinishReason.LENGTH, alone.reason, what + ": roomy sampled run");
        assertEquals(0, roomy.metrics().preemptions, what + ": no preemption in the roomy engine");
        roomy.close();
        assertFalse(Arrays.equals(EngineHarness.referenceGreedy(model, sampledPrompt, SAMPLED_OUTPUT), alone.output()),
                what + ": the sampled request really samples");

        EngineCore core = EngineHarness.engine(model, options(strategy, cache, PAGES));
        Map<String, EngineHarness.Collector> out = new LinkedHashMap<>();
        for (var e : prompts.entrySet()) {
            String id = e.getKey();
            int[] p = e.getValue();
            GenerationRequest r = GenerationRequest.of(id, p, greedy(OUTPUT));
            r = switch (id) {
                case "noisy" -> r.withDrafter(EngineHarness.noisyOracle(want.get(id), p.length, vocab, 5), K);
                case "oracle" -> r.withDrafter(PrefixCheckpointBoundaryTest.allCorrectOracle(want.get(id), p.length), K);
                case "plain" -> r.withDrafter(null, 0);
                default -> r;
            };
            EngineHarness.Collector c = new EngineHarness.Collector();
            core.add(r, c);
            out.put(id, c);
        }
        EngineHarness.Collector sampledOut = new EngineHarness.Collector();
        core.add(GenerationRequest.of("sampled", sampledPrompt, sampled(SAMPLED_OUTPUT)).withDrafter(REPEAT_LAST, K),
                sampledOut);
        out.put("sampled", sampledOut);

        Map<String, Integer> computed = new LinkedHashMap<>();
        Set<String> preempted = new TreeSet<>();
        int guard = 0;
        while (core.hasWork()) {
            core.step();
            for (String id : out.keySet()) {
                int now = core.computedTokensOf(id);
                if (now >= 0 && now < computed.getOrDefault(id, 0)) {
                    preempted.add(id);
                }
                computed.put(id, now);
            }
            assertTrue(++guard < 20_000, what + ": the engine finishes");
        }
        EngineMetrics m = core.metrics();
        assertTrue(m.preemptions > 0, what + ": the tiny KV pool forces preemptions");
        assertTrue(preempted.contains("sampled"), what + ": the sampled request was preempted, preempted: " + preempted);
        assertTrue(preempted.size() >= 2, what + ": more than one request preempted: " + preempted);
        for (var e : want.entrySet()) {
            EngineHarness.Collector c = out.get(e.getKey());
            assertEquals(FinishReason.LENGTH, c.reason, what + " / " + e.getKey() + ": " + c.error);
            assertArrayEquals(e.getValue(), c.output(), what + " / " + e.getKey() + ": greedy output equals the cold run");
        }
        assertEquals(FinishReason.LENGTH, sampledOut.reason, what + " / sampled: " + sampledOut.error);
        assertArrayEquals(alone.output(), sampledOut.output(),
                what + ": sampled output with preemption equals the run without");
        assertTrue(m.strategies.get(strategy).acceptedDraftTokens > 0, what + ": drafts were accepted");
        // what the prefix cache kept through preemptions and evictions: real prefixes, exact states
        List<int[]> sequences = new ArrayList<>();
        prompts.forEach((id, p) -> sequences.add(EngineHarness.concat(p, want.get(id))));
        sequences.add(EngineHarness.concat(sampledPrompt, sampledOut.output()));
        for (EngineCore.CachedCheckpoint cp : core.prefixCheckpoints()) {
            int n = cp.tokens().length;
            assertTrue(sequences.stream().anyMatch(q -> q.length > n && Arrays.equals(q, 0, n, cp.tokens(), 0, n)),
                    what + ": checkpoint of " + n + " tokens is not a prefix of any sequence");
            EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), cp.slot(), cp.tokens(),
                    what + ": checkpoint at " + n + " tokens");
        }
        if (cache) {
            assertTrue(m.prefixBlocks > 0, what + ": the cache kept blocks");
        }
        PrefixCheckpointBoundaryTest.assertNoLeaks(core, what);
        core.close();
    }
}
