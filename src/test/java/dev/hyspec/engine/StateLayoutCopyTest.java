package dev.hyspec.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.model.BatchRow;
import dev.hyspec.model.BatchRow.Logits;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.sampling.Sampler;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.KvBlockPool;
import dev.hyspec.state.LayoutPolicy;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.ReplayStrategy;
import dev.hyspec.state.RollbackStrategy;
import dev.hyspec.state.StateStore;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 5 (and §5): a slot converted to either layout, then forked and copied — one
 * copy lands on a slot that was in the other layout and held another sequence (SGLang's stale-flag
 * regression) — decodes exactly like the original without any copy and like the from-scratch
 * reference, whether the decode rows run in the slot's layout or the other one, and whether they
 * are prefill rows of one token or generate rows through either rollback strategy.
 *
 * <p>The prompt is a whole number of KV pages long, so the copies share the prompt's pages (as a
 * prefix-cache hit does) and write their own decode positions into pages of their own. The same
 * holds through the engine, where prefix-cache checkpoints saved in one layout are forked into
 * requests that run in the other.
 */
class StateLayoutCopyTest {
    private static final int PAGE = 8;
    private static final int PROMPT = 24;
    private static final int N = 12;

    /** How the copies decode: one-token prefill rows, or generate rows through a strategy. */
    enum Decode {
        PREFILL_ROWS(null),
        REPLAY(new ReplayStrategy()),
        INTERMEDIATE_COPY(new IntermediateCopyStrategy());

        final RollbackStrategy strategy;

        Decode(RollbackStrategy strategy) {
            this.strategy = strategy;
        }
    }

    @TestFactory
    Stream<DynamicTest> copiesAndForksInEitherLayoutDecodeLikeTheOriginal() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (StateLayout src : StateLayout.values()) {
                for (boolean sameLayout : new boolean[] {true, false}) {
                    for (Decode decode : Decode.values()) {
                        StateLayout decodeLayout = sameLayout ? src : src.other();
                        tests.add(DynamicTest.dynamicTest(f.name() + " / slot " + src + " / decode " + decodeLayout + " / "
                                + decode, () -> copyThenDecode(f, src, decodeLayout, decode, false)));
                    }
                }
            }
        }
        return tests.stream();
    }

    /**
     * The destination of the copy has just run a generate row through the strategy and committed it
     * (replay: it still owes that token), in the other layout: the copy must leave none of that behind.
     */
    @TestFactory
    Stream<DynamicTest> copyOntoASlotThatWasDecodingLeavesNoStaleWork() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (StateLayout src : StateLayout.values()) {
                for (Decode decode : List.of(Decode.REPLAY, Decode.INTERMEDIATE_COPY)) {
                    tests.add(DynamicTest.dynamicTest(f.name() + " / slot " + src + " / " + decode,
                            () -> copyThenDecode(f, src, src, decode, true)));
                }
            }
        }
        return tests.stream();
    }

    /**
     * The same through the engine: prefix-cache checkpoints are saved by prefill chunks (prefill
     * layout) and by generate rows (generate layout), then forked into new requests whose next row
     * runs in the other layout. Every output equals the reference.
     */
    @TestFactory
    Stream<DynamicTest> prefixCacheForksAcrossLayoutsDecodeLikeAColdRun() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (StateLayout prefill : StateLayout.values()) {
                for (String strategy : EngineHarness.STRATEGIES) {
                    tests.add(DynamicTest.dynamicTest(f.name() + " / prefill " + prefill + ", generate " + prefill.other()
                            + " / " + strategy, () -> engineForks(f, new LayoutPolicy(prefill, prefill.other()), strategy)));
                }
            }
        }
        return tests.stream();
    }

    private static void engineForks(Fixture f, LayoutPolicy layouts, String strategy) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        int block = 16;
        EngineOptions options = EngineOptions.defaults().withDrafts(4).withStrategy(strategy, java.util.Map.of())
                .withPrefixCache(true, block).withLayouts(layouts);
        EngineCore core = EngineHarness.engine(model, options);
        // a prompt of two whole blocks: its one prefill chunk ends on a boundary and checkpoints block 2
        int[] prompt = new Random(8).ints(2 * block, 3, vocab).toArray();
        int[] first = EngineHarness.referenceGreedy(model, prompt, 30);
        // A: block 2 checkpointed by its prefill chunk (prefill layout), block 3 by a generate row
        EngineHarness.Collector a = EngineHarness.run(core, List.of(GenerationRequest.of("a", prompt, EngineHarness.greedy(30))
                .withDrafter(EngineHarness.noisyOracle(first, prompt.length, vocab, 3), 4))).get("a");
        assertArrayEquals(first, a.output(), "a");
        assertEquals(2, core.metrics().prefixCheckpoints, "checkpoints at 32 (prefill) and 48 (generate)");
        int[] sequence = EngineHarness.concat(prompt, first);
        for (EngineCore.CachedCheckpoint cp : core.prefixCheckpoints()) {
            String what = "checkpoint after " + cp.tokens().length + " tokens";
            assertArrayEquals(Arrays.copyOf(sequence, cp.tokens().length), cp.tokens(), what + ": keyed by the real tokens");
            EngineHarness.assertStateEqualsRecompute(model, core.store().pool(), cp.slot(), cp.tokens(), what);
        }
        // B hits block 3 (the generate-row checkpoint), C hits block 2 (the prefill checkpoint)
        int[] b = EngineHarness.concat(EngineHarness.concat(prompt, Arrays.copyOf(first, 20)), new int[] {5, 6, 7});
        int[] c = EngineHarness.concat(prompt, new int[] {9, 8, 7, 6});
        int[] wantB = EngineHarness.referenceGreedy(model, b, 20);
        int[] wantC = EngineHarness.referenceGreedy(model, c, 20);
        long conversions = core.metrics().layoutConversions;
        var out = EngineHarness.run(core, List.of(
                GenerationRequest.of("b", b, EngineHarness.greedy(20)).withDrafter(EngineHarness.noisyOracle(wantB, b.length, vocab, 4), 4),
                GenerationRequest.of("c", c, EngineHarness.greedy(20))));
        EngineMetrics m = core.metrics();
        assertEquals(2, m.prefixHits, "both hit the cache");
        assertEquals(3 * block + 2 * block, m.prefixHitTokens, "b restores block 3, c block 2");
        assertTrue(m.layoutConversions > conversions, "the forked slots were converted");
        assertArrayEquals(wantB, out.get("b").output(), "b from a generate-row checkpoint");
        assertArrayEquals(wantC, out.get("c").output(), "c from a prefill checkpoint");
        core.close();
    }

    /** A sequence decoded by hand: its slot, its page table, its length and what it produced. */
    private static final class Seq {
        final String name;
        final int slot;
        int[] pages;
        int length;
        int last;
        final List<Integer> out = new ArrayList<>();

        Seq(String name, int slot, int[] pages, int length) {
            this.name = name;
            this.slot = slot;
            this.pages = pages;
            this.length = length;
        }

        void ensurePages(KvBlockPool kv, int positions) {
            int need = kv.pagesFor(positions);
            while (pages.length < need) {
                int p = kv.allocate();
                assertTrue(p >= 0, "KV pool too small for the test");
                pages = Arrays.copyOf(pages, pages.length + 1);
                pages[pages.length - 1] = p;
            }
        }

        int[] output() {
            return out.stream().mapToInt(Integer::intValue).toArray();
        }
    }

    private static void copyThenDecode(Fixture f, StateLayout src, StateLayout decodeLayout, Decode decode,
                                       boolean destinationWasDecoding) {
        HybridModel model = EngineHarness.model(f);
        Backend backend = model.backend();
        int vocab = model.config().vocabSize();
        Random rnd = new Random(5);
        int[] prompt = rnd.ints(PROMPT, 3, vocab).toArray();
        int[] other = rnd.ints(13, 3, vocab).toArray();
        int[] ref = EngineHarness.referenceGreedy(model, prompt, N);
        StateLayout natural = model.naturalLayout();
        String what = f.name() + " / slot " + src + " / decode " + decodeLayout + " / " + decode;

        try (StateStore store = model.newStateStore(6, PAGE, 64, LayoutPolicy.of(natural))) {
            MambaStatePool pool = store.pool();
            KvBlockPool kv = store.kv();
            // the original: prefill the prompt in the natural layout, then convert to the source layout
            Seq orig = new Seq("original", pool.alloc(), new int[0], 0);
            float[] first = run(model, store, new LayoutPolicy(natural, natural), List.of(orig), prompt, null).get(0);
            assertEquals(ref[0], Sampler.argmax(first), what + ": first token of the prefill");
            orig.last = ref[0];
            orig.out.add(ref[0]);
            pool.ensureLayout(orig.slot, src);
            assertEquals(src, pool.layout(orig.slot));
            int[] promptPages = orig.pages.clone();

            // a slot in the other layout holding another sequence's state: the copy's destination
            Seq stale = new Seq("stale", pool.alloc(), new int[0], 0);
            run(model, store, new LayoutPolicy(src.other(), src.other()), List.of(stale), other, null);
            if (destinationWasDecoding) {
                // one generate row through the strategy, committed (replay now owes that token)
                stale.last = 7;
                run(model, store, new LayoutPolicy(src.other(), src.other()), List.of(stale), null, decode.strategy);
            }
            assertEquals(src.other(), pool.layout(stale.slot), what + ": the destination starts in the other layout");

            int forked = pool.fork(orig.slot);
            assertTrue(forked >= 0);
            pool.copy(orig.slot, stale.slot);
            for (int slot : new int[] {forked, stale.slot}) {
                assertEquals(src, pool.layout(slot), what + ": slot " + slot + " must carry the source's layout flag");
                assertEquals(1, pool.refCount(slot));
                for (int l = 0; l < pool.numLayers(); l++) {
                    assertArrayEquals(backend.download(pool.conv(l, orig.slot)), backend.download(pool.conv(l, slot)),
                            what + ": conv window of layer " + l + " copied");
                    assertArrayEquals(backend.download(pool.ssm(l, orig.slot)), backend.download(pool.ssm(l, slot)),
                            what + ": state of layer " + l + " copied");
                }
            }
            assertEquals(src, pool.layout(orig.slot), what + ": the source keeps its layout");

            List<Seq> seqs = new ArrayList<>();
            seqs.add(orig);
            for (Seq s : List.of(new Seq("fork", forked, promptPages.clone(), PROMPT),
                    new Seq("copy over stale slot", stale.slot, promptPages.clone(), PROMPT))) {
                s.last = ref[0];
                s.out.add(ref[0]);
                seqs.add(s);
            }
            // decode all three side by side, one token per step, in the decode layout
            LayoutPolicy decodePolicy = new LayoutPolicy(decodeLayout, decodeLayout);
            for (int i = 1; i < N; i++) {
                List<float[]> logits = run(model, store, decodePolicy, seqs, null, decode.strategy);
                for (int r = 0; r < seqs.size(); r++) {
                    Seq s = seqs.get(r);
                    s.last = Sampler.argmax(logits.get(r));
                    s.out.add(s.last);
                }
            }
            for (Seq s : seqs) {
                assertEquals(decodeLayout, pool.layout(s.slot), what + ": " + s.name + " decoded in the decode layout");
                assertArrayEquals(ref, s.output(), what + ": " + s.name + " continuation equals the reference");
                assertArrayEquals(orig.output(), s.output(), what + ": " + s.name + " continuation equals the original's");
            }
            // and the state each one holds is the recompute of what it consumed
            int[] consumed = EngineHarness.concat(prompt, Arrays.copyOf(ref, N - 1));
            for (Seq s : seqs) {
                if (decode.strategy != null) {
                    decode.strategy.settle(pool, s.slot, model.recurrentOps());
                }
                EngineHarness.assertStateEqualsRecompute(model, pool, s.slot, consumed, what + ": " + s.name);
            }
            assertNotEquals(orig.slot, forked);
        }
    }

    /**
     * One forward pass: with {@code prefill} non-null a single row consuming it (logits of its last
     * token), else one row per sequence feeding its last token — a one-token prefill row when
     * {@code strategy} is null, else a generate row through {@code strategy}, committed with 1 accepted.
     * Returns one logits row per sequence.
     */
    private static List<float[]> run(HybridModel model, StateStore store, LayoutPolicy layouts, List<Seq> seqs,
                                     int[] prefill, RollbackStrategy strategy) {
        StateStore view = new StateStore(store.pool(), store.kv(), layouts);
        List<BatchRow> rows = new ArrayList<>();
        for (Seq s : seqs) {
            int[] tokens = prefill != null ? prefill : new int[] {s.last};
            s.ensurePages(store.kv(), s.length + tokens.length);
            RowMode mode = prefill != null || strategy == null ? RowMode.PREFILL : RowMode.GENERATE;
            rows.add(new BatchRow(s.slot, tokens, s.length, mode, mode == RowMode.GENERATE ? strategy : null, s.pages,
                    mode == RowMode.GENERATE ? Logits.ALL : Logits.LAST));
        }
        float[] logits = model.backend().download(model.forward(new ForwardBatch(rows), view));
        int vocab = model.config().vocabSize();
        List<float[]> out = new ArrayList<>();
        for (int r = 0; r < seqs.size(); r++) {
            Seq s = seqs.get(r);
            BatchRow row = rows.get(r);
            if (row.mode() == RowMode.GENERATE) {
                strategy.commit(store.pool(), s.slot, model.recurrentOps(), 1);
            }
            s.length += row.length();
            out.add(Arrays.copyOfRange(logits, r * vocab, (r + 1) * vocab));
        }
        return out;
    }
}
