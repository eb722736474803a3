package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §6: with prefix caching on, prefill chunks end on block boundaries — the last chunk too,
 * up to the last boundary of the prompt — so a prompt of {@code 2B + 5} tokens leaves a checkpoint at
 * {@code 2B} equal to a fresh prefill of those tokens, and a request sharing those {@code 2B} tokens
 * restores it and generates what a cold run generates.
 */
class PrefillAlignmentTest {
    private static final int B = 16;

    @TestFactory
    Stream<DynamicTest> promptPrefillCheckpointsItsLastBoundary() {
        return EngineHarness.fixtures().stream().map(f -> DynamicTest.dynamicTest(f.name(), () -> check(f)));
    }

    private static void check(Fixture f) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        EngineCore core = EngineHarness.engine(model, EngineOptions.defaults().withBudget(4, 256)
                .withStrategy("replay", Map.of()).withPrefixCache(true, B));
        Random rnd = new Random(9);
        int[] prompt = rnd.ints(2 * B + 5, 3, vocab).toArray();
        EngineHarness.Collector first = new EngineHarness.Collector();
        core.add(GenerationRequest.of("first", prompt, greedy(3)).withDrafter(null, 0), first);
        core.step();
        assertEquals(List.of(new EngineCore.StepRow("first", RowMode.PREFILL, 2 * B, 0)), core.lastStep(),
                "the first chunk stops at the last block boundary");
        EngineHarness.drain(core);
        assertArrayEquals(EngineHarness.referenceGreedy(model, prompt, 3), first.output());
        EngineCore.CachedCheckpoint at2B = core.prefixCheckpoints().stream()
                .filter(c -> c.tokens().length == 2 * B).findFirst().orElseThrow();
        assertArrayEquals(Arrays.copyOf(prompt, 2 * B), at2B.tokens());
        EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), at2B.slot(), at2B.tokens(),
                f.name() + ": checkpoint at 2B");

        int[] second = EngineHarness.concat(Arrays.copyOf(prompt, 2 * B), rnd.ints(7, 3, vocab).toArray());
        EngineHarness.Collector out = new EngineHarness.Collector();
        core.add(GenerationRequest.of("second", second, greedy(10)), out);
        EngineHarness.drain(core);
        assertTrue(core.metrics().prefixHitTokens >= 2 * B, "the second request restores the 2B checkpoint");
        assertArrayEquals(EngineHarness.referenceGreedy(model, second, 10), out.output(), "output equals a cold run");
        core.close();
    }
}
