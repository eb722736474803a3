package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.ReplayStrategy;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 7 and §7: requests pinned to {@code replay} and to {@code intermediate-copy}
 * (and one left to the engine's default) run with drafts in the same steps of one engine; each one's
 * output equals the same request run alone in an engine of its own and the from-scratch greedy
 * reference, and the per-strategy metrics add up to exactly what the lone runs counted. Then the A/B
 * split: near its weights, sticky per request id, overridden by a pin, and an unknown pin is refused.
 */
class MixedStrategiesOneBatchTest {
    private static final String REPLAY = ReplayStrategy.ID;
    private static final String COPY = IntermediateCopyStrategy.ID;
    private static final int K = 4;

    @TestFactory
    Stream<DynamicTest> bothStrategiesInOneBatchEqualEachRunAlone() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            tests.add(DynamicTest.dynamicTest(f.name(), () -> mixed(f)));
        }
        return tests.stream();
    }

    private static void mixed(Fixture f) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        // default strategy intermediate-copy, so the unpinned request is not replay by accident
        EngineOptions options = EngineOptions.defaults().withDrafts(K).withBudget(8, 256).withStrategy(COPY, Map.of())
                .withPrefixCache(true, 16);

        Map<String, int[]> prompts = new LinkedHashMap<>();
        Map<String, Integer> lengths = new LinkedHashMap<>();
        Map<String, String> pins = new HashMap<>();
        prompts.put("replay-oracle", EngineHarness.repetitivePrompt(11, 4, 1, vocab));
        lengths.put("replay-oracle", 36);
        pins.put("replay-oracle", REPLAY);
        prompts.put("copy-oracle", f.prompts().get(0));
        lengths.put("copy-oracle", 36);
        pins.put("copy-oracle", COPY);
        prompts.put("replay-ngram", EngineHarness.repetitivePrompt(15, 5, 3, vocab));
        lengths.put("replay-ngram", 30);
        pins.put("replay-ngram", REPLAY);
        prompts.put("copy-ngram", EngineHarness.repetitivePrompt(14, 3, 4, vocab));
        lengths.put("copy-ngram", 30);
        pins.put("copy-ngram", COPY);
        prompts.put("default-oracle", EngineHarness.repetitivePrompt(19, 6, 5, vocab));
        lengths.put("default-oracle", 33);

        Map<String, int[]> want = new LinkedHashMap<>();
        prompts.forEach((id, p) -> want.put(id, EngineHarness.referenceGreedy(model, p, lengths.get(id))));
        // a fresh request each time: the noisy oracle's random draws must start over for every run
        Map<String, Supplier<GenerationRequest>> requests = new LinkedHashMap<>();
        long seed = 31;
        for (String id : prompts.keySet()) {
            long s = seed++;
            requests.put(id, () -> {
                GenerationRequest r = GenerationRequest.of(id, prompts.get(id), greedy(lengths.get(id)));
                if (id.endsWith("-oracle")) {
                    r = r.withDrafter(EngineHarness.noisyOracle(want.get(id), prompts.get(id).length, vocab, s), K);
                }
                return pins.containsKey(id) ? r.withStrategy(pins.get(id)) : r;
            });
        }

        // each alone
        Map<String, int[]> alone = new LinkedHashMap<>();
        Map<String, EngineMetrics.StrategyStats> expected = new HashMap<>();
        for (var e : requests.entrySet()) {
            EngineCore core = EngineHarness.engine(model, options);
            EngineHarness.Collector c = EngineHarness.run(core, List.of(e.getValue().get())).get(e.getKey());
            assertEquals(FinishReason.LENGTH, c.reason, e.getKey() + " alone");
            alone.put(e.getKey(), c.output());
            String strategy = pins.getOrDefault(e.getKey(), COPY);
            EngineMetrics.StrategyStats st = core.metrics().strategies.get(strategy);
            EngineMetrics.StrategyStats sum = expected.computeIfAbsent(strategy, k -> new EngineMetrics.StrategyStats());
            sum.requests += st.requests;
            sum.generateRows += st.generateRows;
            sum.draftTokens += st.draftTokens;
            sum.acceptedDraftTokens += st.acceptedDraftTokens;
            sum.outputTokens += st.outputTokens;
            core.close();
        }

        // all together
        EngineCore core = EngineHarness.engine(model, options);
        Map<String, EngineHarness.Collector> out = new LinkedHashMap<>();
        Map<String, String> strategyOf = new HashMap<>();
        for (var e : requests.entrySet()) {
            EngineHarness.Collector c = new EngineHarness.Collector();
            core.add(e.getValue().get(), c);
            out.put(e.getKey(), c);
            strategyOf.put(e.getKey(), core.strategyOf(e.getKey()));
        }
        for (var e : prompts.keySet()) {
            assertEquals(pins.getOrDefault(e, COPY), strategyOf.get(e), e + ": pinned or default strategy");
        }
        int bothWithDrafts = 0;
        int guard = 0;
        while (core.hasWork()) {
            core.step();
            assertTrue(++guard < 10_000);
            Set<String> withDrafts = new TreeSet<>();
            for (EngineCore.StepRow row : core.lastStep()) {
                if (row.mode() == RowMode.GENERATE && row.drafts() > 0) {
                    withDrafts.add(strategyOf.get(row.requestId()));
                }
            }
            if (withDrafts.equals(Set.of(REPLAY, COPY))) {
                bothWithDrafts++;
            }
        }
        assertTrue(bothWithDrafts >= 3, "steps whose generate rows with drafts use both strategies: " + bothWithDrafts);
        for (String id : prompts.keySet()) {
            EngineHarness.Collector c = out.get(id);
            assertEquals(FinishReason.LENGTH, c.reason, id);
            assertArrayEquals(want.get(id), c.output(), f.name() + " / " + id + ": output equals the reference");
            assertArrayEquals(alone.get(id), c.output(), f.name() + " / " + id + ": output equals the run alone");
        }
        EngineMetrics m = core.metrics();
        assertEquals(Set.of(REPLAY, COPY), m.strategies.keySet());
        assertEquals(2, m.strategies.get(REPLAY).requests);
        assertEquals(3, m.strategies.get(COPY).requests);
        for (String s : List.of(REPLAY, COPY)) {
            EngineMetrics.StrategyStats got = m.strategies.get(s);
            EngineMetrics.StrategyStats exp = expected.get(s);
            String what = f.name() + " / " + s + " metrics";
            assertEquals(exp.requests, got.requests, what + ": requests");
            assertEquals(exp.generateRows, got.generateRows, what + ": generate rows");
            assertEquals(exp.draftTokens, got.draftTokens, what + ": draft tokens");
            assertEquals(exp.acceptedDraftTokens, got.acceptedDraftTokens, what + ": accepted drafts");
            assertEquals(exp.outputTokens, got.outputTokens, what + ": output tokens");
            assertTrue(got.draftTokens > 0 && got.acceptedDraftTokens > 0 && got.acceptedDraftTokens < got.draftTokens,
                    what + ": drafts proposed, some accepted, some rejected");
        }
        long outputs = 0;
        for (String id : prompts.keySet()) {
            outputs += lengths.get(id);
        }
        assertEquals(outputs, m.strategies.get(REPLAY).outputTokens + m.strategies.get(COPY).outputTokens);
        core.close();
    }

    // ---- A/B ----

    private static EngineOptions abOptions() {
        return EngineOptions.defaults().withStrategy(REPLAY, Map.of(REPLAY, 90, COPY, 10));
    }

    @Test
    void abSplitFollowsTheWeightsAndIsStickyPerRequestId() {
        HybridModel model = EngineHarness.model(EngineHarness.fixture("nemotron_h"));
        int n = 400;
        EngineCore core = EngineHarness.engine(model, abOptions());
        Map<String, String> chosen = new LinkedHashMap<>();
        for (int i = 0; i < n; i++) {
            String id = "cmpl-" + Integer.toHexString(0x5f3a00 + 7 * i);
            core.add(GenerationRequest.of(id, new int[] {5, 6, 7}, greedy(2)), new EngineHarness.Collector());
            chosen.put(id, core.strategyOf(id));
        }
        long replay = chosen.values().stream().filter(REPLAY::equals).count();
        long copy = chosen.values().stream().filter(COPY::equals).count();
        assertEquals(n, replay + copy, "every request gets one of the weighted strategies");
        assertTrue(replay >= 0.85 * n && replay <= 0.95 * n, "90/10 split, got " + replay + " replay of " + n);
        EngineMetrics m = core.metrics();
        assertEquals(replay, m.strategies.get(REPLAY).requests);
        assertEquals(copy, m.strategies.get(COPY).requests);

        // sticky: the same id gets the same strategy again — after an abort, and in another engine,
        // whatever the prompt and the order of arrival
        List<String> ids = new ArrayList<>(chosen.keySet());
        for (String id : ids.subList(0, 40)) {
            assertTrue(core.abort(id));
            core.add(GenerationRequest.of(id, new int[] {9, 9}, greedy(3)), new EngineHarness.Collector());
            assertEquals(chosen.get(id), core.strategyOf(id), id + " resubmitted");
        }
        core.close();
        EngineCore other = EngineHarness.engine(model, abOptions());
        for (int i = ids.size() - 1; i >= 0; i--) {
            String id = ids.get(i);
            other.add(GenerationRequest.of(id, new int[] {11, 12, 13, 14}, greedy(1)), new EngineHarness.Collector());
            assertEquals(chosen.get(id), other.strategyOf(id), id + " in another engine");
        }
        other.close();
    }

    @Test
    void abRequestsRunWithTheirStrategyAndAPinOverridesTheSplit() {
        HybridModel model = EngineHarness.model(EngineHarness.fixture("qwen3_5"));
        int vocab = model.config().vocabSize();
        EngineCore probe = EngineHarness.engine(model, abOptions());
        List<String> abReplay = new ArrayList<>();
        List<String> abCopy = new ArrayList<>();
        for (int i = 0; abReplay.size() < 2 || abCopy.size() < 2; i++) {
            String id = "req-" + i;
            probe.add(GenerationRequest.of(id, new int[] {5}, greedy(1)), new EngineHarness.Collector());
            (REPLAY.equals(probe.strategyOf(id)) ? abReplay : abCopy).add(id);
            assertTrue(i < 1000);
        }
        probe.close();

        EngineCore core = EngineHarness.engine(model, abOptions().withDrafts(K));
        int[] prompt = EngineHarness.repetitivePrompt(12, 4, 8, vocab);
        int[] want = EngineHarness.referenceGreedy(model, prompt, 24);
        Map<String, EngineHarness.Collector> out = new LinkedHashMap<>();
        Map<String, String> expected = new LinkedHashMap<>();
        // one of each left to the split, one of each pinned against it
        expected.put(abReplay.get(0), REPLAY);
        expected.put(abCopy.get(0), COPY);
        expected.put(abReplay.get(1), COPY);
        expected.put(abCopy.get(1), REPLAY);
        long seed = 3;
        for (var e : expected.entrySet()) {
            String id = e.getKey();
            GenerationRequest r = GenerationRequest.of(id, prompt, greedy(want.length))
                    .withDrafter(EngineHarness.noisyOracle(want, prompt.length, vocab, seed++), K);
            if (id.equals(abReplay.get(1)) || id.equals(abCopy.get(1))) {
                r = r.withStrategy(e.getValue());
            }
            EngineHarness.Collector c = new EngineHarness.Collector();
            core.add(r, c);
            out.put(id, c);
            assertEquals(e.getValue(), core.strategyOf(id), id + (r.strategy() != null ? " pinned" : " by the split"));
        }
        EngineHarness.drain(core);
        for (var e : out.entrySet()) {
            assertArrayEquals(want, e.getValue().output(), e.getKey());
        }
        EngineMetrics m = core.metrics();
        for (String s : List.of(REPLAY, COPY)) {
            assertEquals(2, m.strategies.get(s).requests, s + " requests");
            assertTrue(m.strategies.get(s).generateRows > 0 && m.strategies.get(s).draftTokens > 0, s + " ran");
            assertEquals(2L * want.length, m.strategies.get(s).outputTokens, s + " output tokens");
        }
        core.close();
    }

    @Test
    void anUnknownPinnedStrategyIsRefusedNamingRollbackStrategy() {
        HybridModel model = EngineHarness.model(EngineHarness.fixture("nemotron_h"));
        EngineCore core = EngineHarness.engine(model, abOptions());
        GenerationRequest bad = GenerationRequest.of("bad", new int[] {5, 6}, greedy(4)).withStrategy("fast-forward");
        InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> core.validate(bad));
        assertEquals("rollback_strategy", e.param());
        assertTrue(e.getMessage().contains("fast-forward"), e.getMessage());
        e = assertThrows(InvalidRequestException.class, () -> core.add(bad, new EngineHarness.Collector()));
        assertEquals("rollback_strategy", e.param());
        assertNull(core.strategyOf("bad"));
        assertEquals(0, core.numWaiting());
        assertTrue(core.metrics().strategies.isEmpty(), "a refused request counts for no strategy");
        // the same id is free for a good request
        core.add(GenerationRequest.of("bad", new int[] {5, 6}, greedy(4)).withStrategy(COPY), new EngineHarness.Collector());
        assertEquals(COPY, core.strategyOf("bad"));
        core.close();
        // and configuration naming an unknown strategy does not start
        assertThrows(IllegalArgumentException.class, () -> EngineHarness.engine(model,
                EngineOptions.defaults().withStrategy(REPLAY, Map.of(REPLAY, 50, "fast-forward", 50))));
        assertThrows(IllegalArgumentException.class, () -> EngineHarness.engine(model,
                EngineOptions.defaults().withStrategy("fast-forward", Map.of())));
    }
}
