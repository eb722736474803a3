package dev.hyspec.state;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.StateLayout;
import dev.hyspec.testing.TestBackends;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.BatchRow;
import dev.hyspec.model.BatchRow.Logits;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.StateAssertions;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Unit tests of {@link MambaStatePool} (DESIGN §4 I4, §5) on a real model's recurrent shapes
 * (Nemotron-H: Mamba2 layers and an attention layer): {@code alloc} hands out zeroed slots in the
 * allocation layout with no leftover strategy work, reference counts free a slot only with its last
 * holder, a slot that still owes replay work can be neither copied nor forked (and a refused fork
 * leaks nothing), and the strategies' buffers show in {@link MambaStatePool#bytes()}.
 */
class MambaStatePoolTest {
    private static final int PAGE = 16;
    private static HybridModel model;
    private static RecurrentOps[] ops;
    private static int[] prompt;

    @BeforeAll
    static void load() {
        model = HybridModel.load(Checkpoint.open(Fixtures.named("nemotron_h").dir()), TestBackends.create());
        ops = model.recurrentOps();
        prompt = new Random(3).ints(21, 3, model.config().vocabSize()).toArray();
    }

    private static StateStore store(int slots, StateLayout allocLayout) {
        return model.newStateStore(slots, PAGE, 32, new LayoutPolicy(allocLayout, allocLayout));
    }

    /** Runs one row of {@code tokens} at {@code start} on {@code slot}: a prefill row, or a generate row through {@code strategy}. */
    private static float[] forward(StateStore store, int slot, int[] pages, int[] tokens, int start,
                                   RollbackStrategy strategy) {
        RowMode mode = strategy == null ? RowMode.PREFILL : RowMode.GENERATE;
        BatchRow row = new BatchRow(slot, tokens, start, mode, strategy, pages,
                mode == RowMode.GENERATE ? Logits.ALL : Logits.LAST);
        return model.backend().download(model.forward(new ForwardBatch(List.of(row)), store));
    }

    private static int[] pages(StateStore store, int n) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) {
            p[i] = store.kv().allocate();
            assertTrue(p[i] >= 0);
        }
        return p;
    }

    private static boolean pendingOf(MambaStatePool pool, int slot) {
        SlotWorkspace w = pool.workspaceIfPresent(slot, ReplayStrategy.ID);
        return w != null && w.pending();
    }

    private static boolean allZero(float[] a) {
        for (float v : a) {
            if (v != 0f) {
                return false;
            }
        }
        return true;
    }

    /** The slot's conv windows and states equal a fresh prefill of {@code tokens}. */
    private static void assertHolds(MambaStatePool pool, int slot, int[] tokens, String what) {
        StateAssertions.assertStateEqualsRecompute(model, pool, slot, tokens, what);
    }

    @ParameterizedTest
    @EnumSource(StateLayout.class)
    void allocZeroesTheSlotResetsItsFlagAndForgetsPendingWork(StateLayout allocLayout) {
        try (StateStore store = store(1, allocLayout)) {
            MambaStatePool pool = store.pool();
            assertEquals(allocLayout, pool.allocLayout());
            int slot = pool.alloc();
            assertEquals(allocLayout, pool.layout(slot));
            int[] pages = pages(store, 2);
            forward(store, slot, pages, prompt, 0, null);
            // leave it dirty: replay work pending, converted to the other layout
            ReplayStrategy replay = new ReplayStrategy();
            forward(store, slot, pages, new int[] {5, 6, 7}, prompt.length, replay);
            replay.commit(pool, slot, ops, 2);
            pool.ensureLayout(slot, allocLayout.other());
            assertEquals(allocLayout.other(), pool.layout(slot));
            assertTrue(pendingOf(pool, slot), "replay owes the committed tokens");
            for (int l = 0; l < pool.numLayers(); l++) {
                assertFalse(allZero(model.backend().download(pool.ssm(l, slot))), "the prefill wrote state " + l);
            }
            pool.release(slot);
            assertEquals(0, pool.usedSlots());

            int again = pool.alloc();
            assertEquals(slot, again, "a one-slot pool hands out the same slot");
            assertEquals(allocLayout, pool.layout(again), "alloc resets the layout flag");
            assertEquals(1, pool.refCount(again));
            for (int l = 0; l < pool.numLayers(); l++) {
                assertTrue(allZero(model.backend().download(pool.conv(l, again))), "conv window " + l + " zeroed");
                assertTrue(allZero(model.backend().download(pool.ssm(l, again))), "state " + l + " zeroed");
            }
            SlotWorkspace w = pool.workspaceIfPresent(again, ReplayStrategy.ID);
            assertFalse(w.pending(), "no pending replay work survives alloc");
            // and the recycled slot computes like a fresh one: p = 0, zeroed buffers
            forward(store, again, pages, prompt, 0, null);
            assertHolds(pool, again, prompt, "recycled slot after prefill");
        }
    }

    @Test
    void referenceCountsFreeASlotOnlyWithItsLastHolder() {
        try (StateStore store = store(3, model.naturalLayout())) {
            MambaStatePool pool = store.pool();
            int a = pool.alloc();
            assertEquals(1, pool.refCount(a));
            pool.retain(a);
            assertEquals(2, pool.refCount(a));
            pool.release(a);
            assertEquals(1, pool.refCount(a));
            assertEquals(1, pool.usedSlots(), "still held once");
            int b = pool.alloc();
            int c = pool.alloc();
            assertEquals(Set.of(a, b, c), new HashSet<>(List.of(a, b, c)), "three distinct slots");
            assertEquals(0, pool.freeSlots());
            assertEquals(-1, pool.alloc(), "full pool");
            assertEquals(-1, pool.fork(b), "full pool: no fork");
            assertEquals(3, pool.usedSlots());

            pool.release(a);
            assertEquals(0, pool.refCount(a));
            assertEquals(1, pool.freeSlots(), "freed with its last holder");
            assertThrows(IllegalStateException.class, () -> pool.release(a), "double release");
            assertThrows(IllegalStateException.class, () -> pool.retain(a), "retain of a free slot");
            assertThrows(IllegalStateException.class, () -> pool.copy(a, b), "copy from a free slot");
            assertThrows(IllegalStateException.class, () -> pool.copy(b, a), "copy into a free slot");
            assertThrows(IllegalStateException.class, () -> pool.fork(a), "fork of a free slot");
            assertThrows(IllegalStateException.class, () -> pool.ensureLayout(a, StateLayout.KV));
            assertEquals(1, pool.freeSlots(), "failed calls change nothing");

            pool.release(b);
            int f = pool.fork(c);
            assertTrue(f >= 0);
            assertEquals(1, pool.refCount(f));
            assertEquals(1, pool.refCount(c));
            pool.release(c);
            pool.release(f);
            assertEquals(0, pool.usedSlots());
        }
    }

    @Test
    void copyAndForkRefuseASourceWithPendingReplayWorkAndLeakNothing() {
        try (StateStore store = store(4, model.naturalLayout())) {
            MambaStatePool pool = store.pool();
            ReplayStrategy replay = new ReplayStrategy();
            int s = pool.alloc();
            int[] pages = pages(store, 2);
            float[] first = forward(store, s, pages, prompt, 0, null);
            int t0 = dev.hyspec.sampling.Sampler.argmax(first);
            int[] row = {t0, 11, 12};
            forward(store, s, pages, row, prompt.length, replay);
            replay.commit(pool, s, ops, 2);   // keeps t0, 11: S(L) is owed until the next step or a settle
            int[] committed = Arrays.copyOf(prompt, prompt.length + 2);
            committed[prompt.length] = t0;
            committed[prompt.length + 1] = 11;

            int t = pool.alloc();
            int used = pool.usedSlots();
            assertThrows(IllegalStateException.class, () -> pool.copy(s, t), "copy of a slot owing replay work");
            assertThrows(IllegalStateException.class, () -> pool.fork(s), "fork of a slot owing replay work");
            assertEquals(used, pool.usedSlots(), "a refused fork must not keep the slot it allocated");

            // the strategy can still hand out the committed state without settling
            replay.copyCommitted(pool, s, ops, t);
            assertHolds(pool, t, committed, "copyCommitted of a pending slot");
            assertTrue(pendingOf(pool, s), "copyCommitted keeps the work");

            replay.settle(pool, s, ops);
            int f = pool.fork(s);
            assertTrue(f >= 0);
            assertHolds(pool, f, committed, "fork after settle");
            pool.copy(s, t);
            assertHolds(pool, t, committed, "copy after settle");

            // intermediate-copy commits eagerly: nothing is owed, copies are allowed at once
            IntermediateCopyStrategy copy = new IntermediateCopyStrategy();
            int u = pool.alloc();
            int[] upages = pages(store, 2);
            forward(store, u, upages, prompt, 0, null);
            forward(store, u, upages, row, prompt.length, copy);
            copy.commit(pool, u, ops, 2);
            pool.copy(u, t);
            assertHolds(pool, t, committed, "copy after an intermediate-copy commit");
        }
    }

    @Test
    void bytesCountTheStateAndGrowWhenStrategiesAttachBuffers() {
        int slots = 4;
        try (StateStore store = store(slots, model.naturalLayout())) {
            MambaStatePool pool = store.pool();
            long perSlot = 0;
            long stateBytes = 0;
            for (RecurrentShape s : pool.layers()) {
                perSlot += 4 * (s.stateElements() + s.convElements());
                stateBytes += 4 * s.stateElements();
            }
            assertTrue(perSlot > 0);
            // every slot plus the padding slot that padding rows of a batched step use
            assertEquals(perSlot * (slots + 1), pool.bytes(), "conv windows and states of every slot, float32");

            int[] row = {3, 4, 5, 6};
            int a = pool.alloc();
            int[] pa = pages(store, 2);
            forward(store, a, pa, prompt, 0, null);
            assertEquals(perSlot * (slots + 1), pool.bytes(), "a prefill attaches nothing");
            forward(store, a, pa, row, prompt.length, new IntermediateCopyStrategy());
            long afterCopy = pool.bytes();
            assertTrue(afterCopy >= perSlot * slots + row.length * stateBytes,
                    "intermediate-copy keeps a scratch state per row position: " + afterCopy);

            int b = pool.alloc();
            int[] pb = pages(store, 2);
            forward(store, b, pb, prompt, 0, null);
            forward(store, b, pb, row, prompt.length, new ReplayStrategy());
            long afterReplay = pool.bytes();
            assertTrue(afterReplay > afterCopy, "replay's input history shows too: " + afterReplay + " vs " + afterCopy);
            assertTrue(afterReplay - afterCopy < row.length * stateBytes,
                    "replay keeps inputs, not per-token states: " + (afterReplay - afterCopy));
        }
    }
}
