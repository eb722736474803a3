package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.StateLayout;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.spec.Drafter;
import dev.hyspec.state.LayoutPolicy;
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
 * DESIGN §8 scenario 3: prefix caching in align mode with block size {@code B = 16}. Prompts of
 * {@code B−7 … B−1} tokens generate with {@code K = 3} or {@code 4} drafts (an all-correct oracle and
 * a noisy one), so the accepted tokens of a verify row cross {@code B} and {@code 2B} inside the row.
 * Every checkpoint the cache holds must be keyed by the tokens the sequence really has and hold the
 * state of a fresh prefill of that prefix; a later request whose prompt is a cached prefix plus a few
 * more tokens must hit the cache (hit count and hit tokens as expected), start from the state a fresh
 * prefill gives, and produce the cold run's greedy output. With the cache off there are no hits and
 * the outputs are the same. Both strategies; page size 16 with {@code K = 3} in the natural layout,
 * page size 8 with {@code K = 4} and generate rows in the other layout.
 */
class PrefixCheckpointBoundaryTest {
    private static final int B = 16;
    private static final int OUTPUT = 36;
    private static final int HIT_OUTPUT = 20;
    private static final int EXTRA = 5;

    @TestFactory
    Stream<DynamicTest> checkpointsCrossedInsideVerifyRowsEqualFreshPrefillAndHitsMatchColdRuns() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                for (int k : new int[] {3, 4}) {
                    int pageSize = k == 3 ? 16 : 8;
                    boolean swapped = k == 4;
                    tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy + " / K=" + k + " / page " + pageSize
                            + (swapped ? " / other layout" : ""), () -> check(f, strategy, k, pageSize, swapped, true)));
                }
            }
        }
        return tests.stream();
    }

    @TestFactory
    Stream<DynamicTest> withPrefixCacheOffThereAreNoHitsAndOutputsAreTheSame() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy, () -> check(f, strategy, 4, 16, false, false)));
            }
        }
        return tests.stream();
    }

    /**
     * A request that hits the only checkpoint while every state slot is taken (one by a running
     * request, one by that checkpoint): making room for its slot must not evict the very checkpoint
     * it restores. Its state after the first step and its output equal the cold run's.
     */
    @TestFactory
    Stream<DynamicTest> hitOnTheOnlyCheckpointWhileTheStatePoolIsFullMatchesColdRun() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                tests.add(DynamicTest.dynamicTest(f.name() + " / " + strategy, () -> checkFullPool(f, strategy)));
            }
        }
        return tests.stream();
    }

    private static void checkFullPool(Fixture f, String strategy) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        EngineOptions options = EngineOptions.defaults().withDrafts(4).withBudget(2, 64).withPools(2, 256)
                .withStrategy(strategy, Map.of()).withPrefixCache(true, B);
        String what = f.name() + " / " + strategy;
        EngineCore core = EngineHarness.engine(model, options);
        Random rnd = new Random(5);
        int[] promptA = randomTokens(rnd, B - 2, vocab);
        int[] refA = EngineHarness.referenceGreedy(model, promptA, 8);
        EngineHarness.Collector a = new EngineHarness.Collector();
        core.add(GenerationRequest.of("A", promptA, greedy(8)).withDrafter(allCorrectOracle(refA, promptA.length), 4), a);
        EngineHarness.drain(core);
        assertArrayEquals(refA, a.output(), what + " / A");
        assertEquals(1, core.prefixCheckpoints().size(), what + ": A leaves one checkpoint, at B");
        assertEquals(1, core.store().pool().usedSlots(), what + ": the checkpoint holds the only used slot");

        int[] promptR = randomTokens(rnd, 5, vocab);
        int[] refR = EngineHarness.referenceGreedy(model, promptR, 6);
        int[] promptH = EngineHarness.concat(Arrays.copyOf(EngineHarness.concat(promptA, refA), B),
                randomTokens(rnd, 3, vocab));
        int[] refH = EngineHarness.referenceGreedy(model, promptH, 12);
        EngineHarness.Collector r = new EngineHarness.Collector();
        EngineHarness.Collector h = new EngineHarness.Collector();
        core.add(GenerationRequest.of("R", promptR, greedy(6)).withDrafter(null, 0), r);
        core.add(GenerationRequest.of("H", promptH, greedy(12))
                .withDrafter(EngineHarness.noisyOracle(refH, promptH.length, vocab, 3), 4), h);
        core.step();
        assertEquals(2, core.numRunning(), what + ": both admitted in the first step");
        assertEquals(promptH.length, core.computedTokensOf("H"), what + ": H's prompt consumed");
        assertEquals(1, core.metrics().prefixHits, what + ": H restored the checkpoint although the pool was full");
        assertEquals(B, core.metrics().prefixHitTokens, what + ": H skipped the cached block");
        core.settle("H");
        EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), core.slotOf("H"), promptH,
                what + ": H's state after its first step");
        EngineHarness.drain(core);
        assertArrayEquals(refR, r.output(), what + " / R");
        assertArrayEquals(refH, h.output(), what + " / H: output equals the cold run");
        assertNoLeaks(core, what);
        core.close();
    }

    static EngineOptions withPageSize(EngineOptions o, int pageSize) {
        return new EngineOptions(o.maxNumSeqs(), o.maxNumBatchedTokens(), o.maxModelLen(), o.stateSlots(), pageSize,
                o.kvPages(), o.numDrafts(), o.ngramMin(), o.ngramMax(), o.defaultStrategy(), o.abWeights(),
                o.prefixCaching(), o.prefixBlockSize(), o.layouts());
    }

    /** Proposes the reference continuation itself: every draft is accepted. */
    static Drafter allCorrectOracle(int[] reference, int promptLength) {
        return (tokens, length, numDrafts) -> {
            int p = length - promptLength;
            int d = Math.max(0, Math.min(numDrafts, reference.length - p));
            return Arrays.copyOfRange(reference, p, p + d);
        };
    }

    static int[] randomTokens(Random rnd, int n, int vocab) {
        return rnd.ints(n, 3, vocab).toArray();
    }

    private static void check(Fixture f, String strategy, int k, int pageSize, boolean swapped, boolean cacheOn) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        StateLayout natural = model.naturalLayout();
        EngineOptions options = withPageSize(EngineOptions.defaults(), pageSize).withDrafts(k).withPools(128, 2048)
                .withStrategy(strategy, Map.of()).withPrefixCache(cacheOn, B)
                .withLayouts(swapped ? new LayoutPolicy(natural, natural.other()) : LayoutPolicy.of(natural));
        assertEquals(0, options.prefixBlockSize() % options.pageSize(), "the page size divides B");
        String what = f.name() + " / " + strategy + " / K=" + k + (cacheOn ? "" : " / cache off");
        EngineCore core = EngineHarness.engine(model, options);
        Random rnd = new Random(31L * k + pageSize);
        Map<String, int[]> sequences = new LinkedHashMap<>();

        // round 1: prompts of B−7 … B−1 tokens, long enough outputs to cross B and 2B (some 3B)
        Map<String, int[]> prompts = new LinkedHashMap<>();
        Map<String, int[]> want = new LinkedHashMap<>();
        Map<String, EngineHarness.Collector> out = new LinkedHashMap<>();
        for (int len = B - 7; len <= B - 1; len++) {
            String id = "p" + len;
            int[] prompt = randomTokens(rnd, len, vocab);
            int[] ref = EngineHarness.referenceGreedy(model, prompt, OUTPUT);
            prompts.put(id, prompt);
            want.put(id, ref);
            Drafter drafter = len % 2 == 0 ? allCorrectOracle(ref, len) : EngineHarness.noisyOracle(ref, len, vocab, len);
            EngineHarness.Collector c = new EngineHarness.Collector();
            core.add(GenerationRequest.of(id, prompt, greedy(OUTPUT)).withDrafter(drafter, k), c);
            out.put(id, c);
        }
        Set<Integer> crossedInside = new TreeSet<>();
        while (core.hasWork()) {
            Map<String, Integer> before = new LinkedHashMap<>();
            for (String id : out.keySet()) {
                before.put(id, core.computedTokensOf(id));
            }
            core.step();
            for (EngineCore.StepRow row : core.lastStep()) {
                int after = core.computedTokensOf(row.requestId());
                int from = before.get(row.requestId());
                if (row.mode() == RowMode.GENERATE && after > 0) {
                    for (int end = (from / B + 1) * B; end < after; end += B) {
                        crossedInside.add(end / B);
                    }
                }
            }
        }
        assertTrue(crossedInside.containsAll(List.of(1, 2)),
                what + ": accepted tokens of a verify row should cross B and 2B strictly inside the row, crossed "
                        + crossedInside);
        assertOutputs(out, want, what);
        out.keySet().forEach(id -> sequences.put(id, EngineHarness.concat(prompts.get(id), want.get(id))));
        EngineMetrics m1 = core.metrics();
        assertEquals(0, m1.prefixHits, what + ": prompts shorter than B cannot hit");
        assertCheckpoints(model, core, sequences, cacheOn, what + " after round 1");
        assertNoLeaks(core, what + " after round 1");

        // round 2: a cached prefix (B or 2B tokens) plus a few new tokens; and 2B cached plus a whole
        // new block, whose prefill ends on 3B and leaves a checkpoint made by prefill
        Map<String, int[]> hitPrompts = new LinkedHashMap<>();
        long expectedHitTokens = 0;
        int i = 0;
        for (var e : List.copyOf(sequences.entrySet())) {
            int blocks = 1 + i++ % 2;
            hitPrompts.put("hit-" + e.getKey(),
                    EngineHarness.concat(Arrays.copyOf(e.getValue(), blocks * B), randomTokens(rnd, EXTRA, vocab)));
            expectedHitTokens += blocks * B;
        }
        int[] chain = EngineHarness.concat(Arrays.copyOf(sequences.get("p" + (B - 7)), 2 * B), randomTokens(rnd, B, vocab));
        hitPrompts.put("chain", chain);
        expectedHitTokens += 2 * B;
        runHits(model, core, hitPrompts, k, sequences, what);
        EngineMetrics m2 = core.metrics();
        assertCheckpoints(model, core, sequences, cacheOn, what + " after round 2");
        if (cacheOn && swapped && core.store().pool().numLayers() > 0) {
            int[] want3 = Arrays.copyOf(chain, 3 * B);
            EngineCore.CachedCheckpoint cp = core.prefixCheckpoints().stream()
                    .filter(c -> Arrays.equals(c.tokens(), want3)).findFirst().orElseThrow();
            assertEquals(core.store().layouts().prefill(), core.store().pool().layout(cp.slot()),
                    what + ": the checkpoint at 3B was saved by prefill, in the prefill layout");
        }

        // round 3: hit the checkpoint that prefill saved
        Map<String, int[]> deep = new LinkedHashMap<>();
        deep.put("deep", EngineHarness.concat(chain, randomTokens(rnd, 4, vocab)));
        runHits(model, core, deep, k, sequences, what);
        EngineMetrics m3 = core.metrics();
        if (cacheOn) {
            assertEquals(hitPrompts.size(), m2.prefixHits - m1.prefixHits, what + ": every round-2 request hits");
            assertEquals(expectedHitTokens, m2.prefixHitTokens - m1.prefixHitTokens, what + ": round-2 hit tokens");
            assertEquals(1, m3.prefixHits - m2.prefixHits, what + ": the round-3 request hits");
            assertEquals(3 * B, m3.prefixHitTokens - m2.prefixHitTokens, what + ": round-3 hit tokens");
        } else {
            assertEquals(0, m3.prefixHits, what + ": no hits with the cache off");
            assertEquals(0, m3.prefixHitTokens, what + ": no hit tokens with the cache off");
        }
        assertCheckpoints(model, core, sequences, cacheOn, what + " after round 3");
        assertNoLeaks(core, what + " after round 3");
        core.close();
    }

    /**
     * Runs {@code prompts} together (noisy-oracle drafts): after the first step each request's state
     * equals a fresh prefill of its prompt; at the end each output equals the cold run. Adds the
     * sequences to {@code sequences}.
     */
    private static void runHits(HybridModel model, EngineCore core, Map<String, int[]> prompts, int k,
                                Map<String, int[]> sequences, String what) {
        int vocab = model.config().vocabSize();
        Map<String, int[]> want = new LinkedHashMap<>();
        Map<String, EngineHarness.Collector> out = new LinkedHashMap<>();
        for (var e : prompts.entrySet()) {
            int[] ref = EngineHarness.referenceGreedy(model, e.getValue(), HIT_OUTPUT);
            want.put(e.getKey(), ref);
            EngineHarness.Collector c = new EngineHarness.Collector();
            core.add(GenerationRequest.of(e.getKey(), e.getValue(), greedy(HIT_OUTPUT))
                    .withDrafter(EngineHarness.noisyOracle(ref, e.getValue().length, vocab, 7), k), c);
            out.put(e.getKey(), c);
        }
        core.step();
        for (var e : prompts.entrySet()) {
            assertEquals(e.getValue().length, core.computedTokensOf(e.getKey()),
                    what + " / " + e.getKey() + ": prompt consumed in the first step");
            int copy = core.copyCommitted(e.getKey());
            assertTrue(copy >= 0, "a free slot for the comparison");
            EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), copy, e.getValue(),
                    what + " / " + e.getKey() + ": state after restoring a checkpoint and prefilling the rest");
            core.store().pool().release(copy);
        }
        EngineHarness.drain(core);
        assertOutputs(out, want, what);
        prompts.forEach((id, p) -> sequences.put(id, EngineHarness.concat(p, want.get(id))));
    }

    private static void assertOutputs(Map<String, EngineHarness.Collector> out, Map<String, int[]> want, String what) {
        for (var e : out.entrySet()) {
            assertEquals(FinishReason.LENGTH, e.getValue().reason, what + " / " + e.getKey() + ": " + e.getValue().error);
            assertArrayEquals(want.get(e.getKey()), e.getValue().output(),
                    what + " / " + e.getKey() + ": output equals the cold run");
        }
    }

    /**
     * The cache holds a checkpoint for exactly the block boundaries each finished sequence's
     * committed tokens ({@code all but its last token}) reached — keyed by the sequence's real
     * tokens — and each holds the state of a fresh prefill of its prefix.
     */
    private static void assertCheckpoints(HybridModel model, EngineCore core, Map<String, int[]> sequences,
                                          boolean cacheOn, String what) {
        Set<String> expected = new TreeSet<>();
        if (cacheOn && core.store().pool().numLayers() > 0) {
            for (int[] seq : sequences.values()) {
                for (int end = B; end <= seq.length - 1; end += B) {
                    expected.add(Arrays.toString(Arrays.copyOf(seq, end)));
                }
            }
        }
        Set<String> found = new TreeSet<>();
        for (EngineCore.CachedCheckpoint cp : core.prefixCheckpoints()) {
            assertTrue(found.add(Arrays.toString(cp.tokens())), what + ": one checkpoint per prefix");
            assertTrue(expected.contains(Arrays.toString(cp.tokens())), what + ": checkpoint of " + cp.tokens().length
                    + " tokens " + Arrays.toString(cp.tokens()) + " is not a reached prefix of any sequence");
            EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), cp.slot(), cp.tokens(),
                    what + ": checkpoint at " + cp.tokens().length + " tokens");
        }
        assertEquals(expected, found, what + ": a checkpoint at every boundary the committed tokens reached");
    }

    /** With nothing running, the pools hold exactly what the prefix cache holds. */
    static void assertNoLeaks(EngineCore core, String what) {
        EngineMetrics m = core.metrics();
        assertEquals(0, core.numRunning() + core.numWaiting(), what + ": idle");
        assertEquals(core.prefixCheckpoints().size(), core.store().pool().usedSlots(),
                what + ": state slots in use = prefix checkpoints");
        int pagesPerBlock = core.options().prefixBlockSize() / core.options().pageSize();
        int cachedPages = core.store().kv().enabled() && core.options().prefixCaching() ? m.prefixBlocks * pagesPerBlock : 0;
        assertEquals(cachedPages, core.store().kv().usedPages(), what + ": KV pages in use = pages of cached blocks");
    }
}
