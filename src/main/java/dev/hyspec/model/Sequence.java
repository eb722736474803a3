package dev.hyspec.model;

import dev.hyspec.backend.Tensor;
import dev.hyspec.model.BatchRow.Logits;
import dev.hyspec.state.KvBlockPool;
import dev.hyspec.state.LayoutPolicy;
import dev.hyspec.state.StateStore;
import java.util.Arrays;
import java.util.List;

/**
 * One sequence with a state store of its own: the plain way to run a model without the engine
 * (reference runs, from-scratch recomputes in tests, the CPU benchmark). Every call is a prefill row,
 * so the recurrent state advances in place.
 */
public final class Sequence implements AutoCloseable {
    private static final int PAGE_SIZE = 16;

    private final HybridModel model;
    private final StateStore store;
    private final int slot;
    private int[] pages = new int[0];
    private int length;

    Sequence(HybridModel model, int maxTokens) {
        this.model = model;
        this.store = model.newStateStore(1, PAGE_SIZE, Math.max(1, (maxTokens + PAGE_SIZE - 1) / PAGE_SIZE),
                LayoutPolicy.of(model.naturalLayout()));
        this.slot = store.pool().alloc();
    }

    /**
     * Consumes {@code tokens} at positions {@code L … L+T−1} and returns the logits {@code [T, V]}
     * of every position, or {@code [1, V]} of the last one when {@code allLogits} is false.
     */
    public Tensor forward(int[] tokens, boolean allLogits) {
        KvBlockPool kv = store.kv();
        int need = kv.pagesFor(length + tokens.length);
        if (need > pages.length) {
            int have = pages.length;
            pages = Arrays.copyOf(pages, need);
            for (int i = have; i < need; i++) {
                pages[i] = kv.allocate();
                if (pages[i] < 0) {
                    throw new IllegalStateException("sequence longer than its KV pages allow");
                }
            }
        }
        BatchRow row = new BatchRow(slot, tokens, length, RowMode.PREFILL, null, pages,
                allLogits ? Logits.ALL : Logits.LAST);
        Tensor logits = model.forward(new ForwardBatch(List.of(row)), store);
        length += tokens.length;
        return logits;
    }

    /** Tokens consumed so far. */
    public int length() {
        return length;
    }

    public StateStore store() {
        return store;
    }

    public int slot() {
        return slot;
    }

    /** The KV pages of positions {@code 0 …}, in order. */
    public int[] blockTable() {
        return pages.clone();
    }

    @Override
    public void close() {
        store.close();
    }
}
