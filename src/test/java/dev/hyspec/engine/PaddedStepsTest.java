package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.testing.Fixtures.Fixture;
import dev.hyspec.testing.TestBackends;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN I6: decode and verify steps run in uniform form padded to a graph batch size; the padding
 * rows run on the pool's padding slot and touch no real slot. With the padding forced on (three extra
 * rows per step, as a GPU would add to reach its bucket), rows of different lengths (drafts with
 * varied acceptance next to plain decodes) give exactly the from-scratch greedy output; slots that no
 * request held keep a sentinel bit for bit; the padding rows did run (their strategy buffers exist
 * on the padding slot); and no slot leaks.
 */
class PaddedStepsTest {
    private static final int K = 3;
    private static final int N = 14;
    private static final int SLOTS = 12;
    private static final float SENTINEL = 1234.5f;

    @TestFactory
    Stream<DynamicTest> paddingRowsChangeNothingReal() {
        List<DynamicTest> tests = new ArrayList<>();
        for (Fixture f : EngineHarness.fixtures()) {
            for (String strategy : EngineHarness.STRATEGIES) {
                tests.add(DynamicTest.dynamicTest(f.dir().getFileName() + " / " + strategy, () -> run(f, strategy)));
            }
        }
        return tests.stream();
    }

    private static void run(Fixture f, String strategy) {
        // a model of its own: the padding setting must not leak into other tests' shared models
        HybridModel model = HybridModel.load(Checkpoint.open(f.dir()), TestBackends.create());
        model.setRowPadding(rows -> rows + 3);
        Backend backend = model.backend();
        int vocab = model.config().vocabSize();
        EngineOptions options = EngineOptions.defaults().withDrafts(K).withBudget(4, 256).withPools(SLOTS, 256)
                .withStrategy(strategy, Map.of()).withPrefixCache(false, 16);   // checkpoints would hold slots too
        EngineCore core = EngineHarness.engine(model, options);
        MambaStatePool pool = core.store().pool();
        boolean recurrent = pool.numLayers() > 0;
        if (recurrent) {
            fillFreeSlots(pool, backend);
        }

        List<int[]> prompts = List.of(f.prompts().get(0), EngineHarness.repetitivePrompt(13, 4, 7, vocab),
                f.prompts().get(f.prompts().size() - 1));
        List<GenerationRequest> requests = new ArrayList<>();
        List<int[]> expected = new ArrayList<>();
        for (int i = 0; i < prompts.size(); i++) {
            int[] prompt = prompts.get(i);
            int[] reference = EngineHarness.referenceGreedy(model, prompt, N);
            expected.add(reference);
            GenerationRequest r = GenerationRequest.of("r" + i, prompt, greedy(N));
            // one row with the n-gram drafter, one with drafts of varied acceptance, one plain decode
            r = switch (i) {
                case 0 -> r;
                case 1 -> r.withDrafter(EngineHarness.noisyOracle(reference, prompt.length, vocab, 11), K);
                default -> r.withDrafter(null, 0);
            };
            requests.add(r);
        }
        Map<String, EngineHarness.Collector> out = new java.util.LinkedHashMap<>();
        for (GenerationRequest r : requests) {
            EngineHarness.Collector c = new EngineHarness.Collector();
            out.put(r.id(), c);
            core.add(r, c);
        }
        Set<Integer> held = new HashSet<>();
        int paddedSteps = 0;
        while (core.hasWork()) {
            core.step();
            for (GenerationRequest r : requests) {
                int slot = core.slotOf(r.id());
                if (slot >= 0) {
                    held.add(slot);
                }
            }
            if (core.lastStep().stream().noneMatch(s -> s.mode() == RowMode.PREFILL)) {
                paddedSteps++;
            }
        }
        assertTrue(paddedSteps > 0, "steps without prefill ran (padded)");
        for (int i = 0; i < requests.size(); i++) {
            assertArrayEquals(expected.get(i), out.get("r" + i).output(), "request r" + i);
        }
        if (recurrent) {
            for (int slot = 0; slot < pool.capacity(); slot++) {
                if (!held.contains(slot)) {
                    for (int l = 0; l < pool.numLayers(); l++) {
                        assertSentinel(backend, pool.ssm(l, slot), "state of never-held slot " + slot + ", layer " + l);
                        assertSentinel(backend, pool.conv(l, slot), "conv of never-held slot " + slot + ", layer " + l);
                    }
                }
            }
            assertNotNull(pool.workspaceIfPresent(pool.paddingSlot(), strategy),
                    "the padding rows ran on the padding slot");
            assertEquals(pool.capacity(), pool.freeSlots(), "no slot leaks");
        }
        core.close();
    }

    private static void fillFreeSlots(MambaStatePool pool, Backend backend) {
        for (int slot = 0; slot < pool.capacity(); slot++) {
            for (int l = 0; l < pool.numLayers(); l++) {
                for (Tensor t : new Tensor[] {pool.ssm(l, slot), pool.conv(l, slot)}) {
                    float[] v = new float[(int) t.numel()];
                    java.util.Arrays.fill(v, SENTINEL);
                    Tensor s = backend.upload(v, t.shape());
                    backend.copy(s, t);
                    backend.free(s);
                }
            }
        }
    }

    private static void assertSentinel(Backend backend, Tensor t, String what) {
        for (float v : backend.download(t)) {
            if (v != SENTINEL) {
                throw new AssertionError(what + " was written: " + v);
            }
        }
    }
}
