package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 1: greedy output with n-gram drafts equals greedy output without drafts (the
 * from-scratch reference), for every fixture (HYSPEC_FIXTURES_EXTRA included) and both strategies,
 * for a batch whose steps mix verify rows with drafts, plain decode rows and prefill chunks.
 */
class SpeculativeDecodingLosslessTest {

    @TestFactory
    Stream<DynamicTest> greedyWithDraftsEqualsGreedyWithoutInMixedBatches() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy, () -> check(f, strategy)));
            }
        }
        return tests.stream();
    }

    private static void check(Fixture f, String strategy) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        EngineOptions options = EngineOptions.defaults().withDrafts(4).withBudget(8, 20)
                .withStrategy(strategy, Map.of()).withPrefixCache(true, 16);
        EngineCore core = EngineHarness.engine(model, options);

        Map<String, int[]> prompts = new LinkedHashMap<>();
        Map<String, Integer> lengths = new LinkedHashMap<>();
        prompts.put("repetitive", EngineHarness.repetitivePrompt(13, 5, 1, vocab));
        lengths.put("repetitive", 40);
        prompts.put("fixture", f.prompts().get(0));
        lengths.put("fixture", 30);
        prompts.put("no-drafts", EngineHarness.repetitivePrompt(9, 3, 2, vocab));
        lengths.put("no-drafts", 25);
        prompts.put("late-long", EngineHarness.repetitivePrompt(57, 7, 3, vocab));
        lengths.put("late-long", 30);

        Map<String, int[]> want = new LinkedHashMap<>();
        prompts.forEach((id, p) -> want.put(id, EngineHarness.referenceGreedy(model, p, lengths.get(id))));
        // "repetitive" and "late-long" draft from a noisy oracle (every acceptance count happens),
        // "fixture" uses the engine's n-gram drafter, "no-drafts" never speculates
        Map<String, EngineHarness.Collector> out = new LinkedHashMap<>();
        for (String id : List.of("repetitive", "fixture", "no-drafts")) {
            EngineHarness.Collector c = new EngineHarness.Collector();
            GenerationRequest r = GenerationRequest.of(id, prompts.get(id), greedy(lengths.get(id)));
            if (id.equals("no-drafts")) {
                r = r.withDrafter(null, 0);
            } else if (id.equals("repetitive")) {
                r = r.withDrafter(EngineHarness.noisyOracle(want.get(id), prompts.get(id).length, vocab, 11), 4);
            }
            core.add(r, c);
            out.put(id, c);
        }
        boolean mixed = false;
        int steps = 0;
        while (core.hasWork()) {
            if (steps == 4) {
                EngineHarness.Collector c = new EngineHarness.Collector();
                core.add(GenerationRequest.of("late-long", prompts.get("late-long"), greedy(lengths.get("late-long")))
                        .withDrafter(EngineHarness.noisyOracle(want.get("late-long"), 57, vocab, 12), 4), c);
                out.put("late-long", c);
            }
            core.step();
            steps++;
            boolean verify = false;
            boolean decode = false;
            boolean prefill = false;
            for (EngineCore.StepRow row : core.lastStep()) {
                verify |= row.mode() == RowMode.GENERATE && row.drafts() > 0;
                decode |= row.mode() == RowMode.GENERATE && row.drafts() == 0;
                prefill |= row.mode() == RowMode.PREFILL;
            }
            mixed |= verify && decode && prefill;
        }
        assertTrue(mixed, "some step should hold a verify row, a plain decode row and a prefill chunk together");
        for (var e : out.entrySet()) {
            assertEquals(FinishReason.LENGTH, e.getValue().reason, e.getKey());
            assertArrayEquals(want.get(e.getKey()), e.getValue().output(), f.name() + " / " + strategy + " / " + e.getKey());
        }
        EngineMetrics m = core.metrics();
        EngineMetrics.StrategyStats st = m.strategies.get(strategy);
        assertTrue(st.draftTokens > 0 && st.acceptedDraftTokens > 0,
                "drafts must be proposed and some accepted: " + st.draftTokens + " / " + st.acceptedDraftTokens);
        core.close();
    }
}
