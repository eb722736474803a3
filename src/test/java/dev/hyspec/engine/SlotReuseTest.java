package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.StateLayout;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.state.LayoutPolicy;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 4: a request aborted mid-generation (with drafts, so replay leaves pending
 * tokens and both strategies leave dirty buffers) or mid-prefill (its slot in the prefill layout)
 * hands its slot to the next request, whose state after its first step equals a fresh prefill and
 * whose output equals the cold run — no stale {@code p}, buffers or layout flag. Both strategies,
 * in the natural layout and with generate rows in the other layout. Also: aborting a waiting
 * request and an unknown id, and no slot or page leaks once everything has finished or been
 * aborted (with the prefix cache off and on).
 */
class SlotReuseTest {
    private static final int K = 4;

    @TestFactory
    Stream<DynamicTest> recycledSlotAfterAbortGivesTheColdRun() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                for (boolean swapped : new boolean[] {false, true}) {
                    for (boolean midPrefill : new boolean[] {false, true}) {
                        tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy
                                + (swapped ? " / other layout" : "") + (midPrefill ? " / aborted mid-prefill" : ""),
                                () -> checkReuse(f, strategy, swapped, midPrefill)));
                    }
                }
            }
        }
        return tests.stream();
    }

    @TestFactory
    Stream<DynamicTest> abortOfWaitingAndUnknownRequestsAndNoLeaks() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                for (boolean cache : new boolean[] {false, true}) {
                    tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy + (cache ? " / prefix cache" : ""),
                            () -> checkAbortsAndLeaks(f, strategy, cache)));
                }
            }
        }
        return tests.stream();
    }

    private static EngineOptions options(HybridModel model, String strategy, boolean swapped, boolean cache) {
        StateLayout natural = model.naturalLayout();
        return EngineOptions.defaults().withDrafts(K).withBudget(2, 16).withPools(2, 64)
                .withStrategy(strategy, Map.of()).withPrefixCache(cache, 16)
                .withLayouts(swapped ? new LayoutPolicy(natural, natural.other()) : LayoutPolicy.of(natural));
    }

    private static void checkReuse(Fixture f, String strategy, boolean swapped, boolean midPrefill) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        String what = f.name() + " / " + strategy + (swapped ? " / other layout" : "") + (midPrefill ? " / mid-prefill" : "");
        EngineCore core = EngineHarness.engine(model, options(model, strategy, swapped, false));
        Random rnd = new Random(17);
        int[] promptA = rnd.ints(midPrefill ? 40 : 11, 3, vocab).toArray();
        int[] promptB = rnd.ints(13, 3, vocab).toArray();
        int[] promptC = rnd.ints(9, 3, vocab).toArray();
        int[] refA = EngineHarness.referenceGreedy(model, promptA, 40);
        int[] refB = EngineHarness.referenceGreedy(model, promptB, 30);
        int[] refC = EngineHarness.referenceGreedy(model, promptC, 50);
        EngineHarness.Collector a = new EngineHarness.Collector();
        EngineHarness.Collector b = new EngineHarness.Collector();
        EngineHarness.Collector c = new EngineHarness.Collector();
        core.add(GenerationRequest.of("C", promptC, greedy(50))
                .withDrafter(EngineHarness.noisyOracle(refC, promptC.length, vocab, 2), K), c);
        core.add(GenerationRequest.of("A", promptA, greedy(40))
                .withDrafter(EngineHarness.noisyOracle(refA, promptA.length, vocab, 1), K), a);

        // run A until it is in the middle of its prefill, or has made a few verify steps with drafts
        int generateSteps = 0;
        while (true) {
            core.step();
            boolean aRan = core.lastStep().stream().anyMatch(r -> r.requestId().equals("A"));
            boolean aGenerated = core.lastStep().stream()
                    .anyMatch(r -> r.requestId().equals("A") && r.mode() == RowMode.GENERATE && r.drafts() > 0);
            if (midPrefill && aRan) {
                int computed = core.computedTokensOf("A");
                assertTrue(computed > 0 && computed < promptA.length, what + ": A is mid-prefill, at " + computed);
                break;
            }
            if (aGenerated && ++generateSteps == 3) {
                break;
            }
        }
        int slotA = core.slotOf("A");
        assertTrue(slotA >= 0, what + ": A holds a slot");
        if (midPrefill && swapped) {
            assertEquals(core.store().layouts().prefill(), core.store().pool().layout(slotA),
                    what + ": A's slot is in the prefill layout, not the allocation one");
        }
        int aTokens = a.tokens.size();
        assertTrue(core.abort("A"), what + ": abort of a running request");
        assertEquals(FinishReason.ABORT, a.reason, what + ": A told abort");
        assertEquals(-1, core.slotOf("A"), what + ": A is gone");
        assertFalse(core.abort("A"), what + ": a second abort finds nothing");
        assertArrayEquals(Arrays.copyOf(refA, aTokens), a.output(), what + ": A's tokens before the abort");

        core.add(GenerationRequest.of("B", promptB, greedy(30))
                .withDrafter(EngineHarness.noisyOracle(refB, promptB.length, vocab, 3), K), b);
        core.step();
        assertEquals(slotA, core.slotOf("B"), what + ": B gets A's recycled slot");
        int computed = core.computedTokensOf("B");
        assertTrue(computed > 0, what + ": B ran in its first step");
        core.settle("B");
        EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), core.slotOf("B"),
                Arrays.copyOf(promptB, computed), what + ": B's state after its first step");
        EngineHarness.drain(core);
        assertEquals(FinishReason.LENGTH, b.reason, what + " / B: " + b.error);
        assertArrayEquals(refB, b.output(), what + ": B on the recycled slot equals the cold run");
        assertEquals(FinishReason.LENGTH, c.reason, what + " / C: " + c.error);
        assertArrayEquals(refC, c.output(), what + ": C, running beside the abort, equals the cold run");
        assertTrue(core.metrics().strategies.get(strategy).acceptedDraftTokens > 0, what + ": drafts were accepted");
        assertEquals(1, core.metrics().aborted, what + ": one abort");
        PrefixCheckpointBoundaryTest.assertNoLeaks(core, what);
        core.close();
    }

    private static void checkAbortsAndLeaks(Fixture f, String strategy, boolean cache) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        String what = f.name() + " / " + strategy + (cache ? " / prefix cache" : "");
        EngineCore core = EngineHarness.engine(model, options(model, strategy, false, cache));
        Random rnd = new Random(23);
        int[][] prompts = new int[4][];
        int[][] refs = new int[4][];
        EngineHarness.Collector[] out = new EngineHarness.Collector[4];
        for (int i = 0; i < 4; i++) {
            prompts[i] = rnd.ints(10 + 7 * i, 3, vocab).toArray();
            refs[i] = EngineHarness.referenceGreedy(model, prompts[i], 40);
            out[i] = new EngineHarness.Collector();
            core.add(GenerationRequest.of("r" + i, prompts[i], greedy(40))
                    .withDrafter(EngineHarness.noisyOracle(refs[i], prompts[i].length, vocab, i), K), out[i]);
        }
        assertFalse(core.abort("nobody"), what + ": abort of an unknown id");
        for (int s = 0; s < 6; s++) {
            core.step();
        }
        assertEquals(2, core.numRunning(), what + ": two running");
        assertEquals(2, core.numWaiting(), what + ": two waiting");
        // r2 waits (max two running); abort it before it ever runs
        assertEquals(-1, core.slotOf("r2"), what + ": a waiting request holds no slot");
        assertTrue(core.abort("r2"), what + ": abort of a waiting request");
        assertEquals(FinishReason.ABORT, out[2].reason, what + ": r2 told abort");
        assertTrue(out[2].tokens.isEmpty(), what + ": r2 never produced a token");
        assertEquals(1, core.numWaiting(), what + ": r2 left the queue");
        assertFalse(core.abort("nobody"), what + ": abort of an unknown id");
        // r1 runs with pending replay work and dirty buffers; abort it mid-generation
        assertTrue(core.computedTokensOf("r1") > prompts[1].length, what + ": r1 is generating");
        assertTrue(core.abort("r1"), what + ": abort of a running request");
        assertEquals(FinishReason.ABORT, out[1].reason, what + ": r1 told abort");
        EngineHarness.drain(core);
        for (int i : new int[] {0, 3}) {
            assertEquals(FinishReason.LENGTH, out[i].reason, what + " / r" + i + ": " + out[i].error);
            assertArrayEquals(refs[i], out[i].output(), what + " / r" + i + ": equals the cold run");
        }
        assertFalse(core.abort("r0"), what + ": abort of a finished request");
        assertNull(out[2].error, what + ": r2's abort carries no error");
        EngineMetrics m = core.metrics();
        assertEquals(2, m.aborted, what + ": two aborts");
        assertEquals(2, m.finished, what + ": two finished");
        PrefixCheckpointBoundaryTest.assertNoLeaks(core, what);
        if (!cache) {
            assertEquals(0, core.store().pool().usedSlots(), what + ": no slot in use");
            assertEquals(0, core.store().kv().usedPages(), what + ": no page in use");
        } else if (core.store().pool().numLayers() > 0) {
            assertTrue(core.prefixCheckpoints().size() > 0, what + ": the cache kept checkpoints");
        }
        core.close();
    }
}
