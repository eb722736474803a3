package dev.hyspec.state;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;

/**
 * How a recurrent layer's state survives rejected drafts (DESIGN §4). A generation row (one token,
 * or one token plus drafts) runs through {@link #verify} for every recurrent layer; once the
 * verifier knows how many tokens were accepted, {@link #snapshot} may save intermediate states for
 * the prefix cache, then {@link #commit} makes the slot hold {@code S(L + a)} — at once
 * ({@code intermediate-copy}) or lazily, as the next step's first act ({@code replay}).
 *
 * <p>Implementations keep no per-request state of their own: everything lives in the slot's
 * {@link SlotWorkspace}, which the pool resets when the slot is reused.
 */
public interface RollbackStrategy {
    /** The name used in configuration, requests and metrics. */
    String id();

    /**
     * Runs one row of {@code T} tokens at positions {@code L … L+T−1} through a recurrent layer: the
     * outputs {@code y [T, ·]} are those of the exact recurrence from {@code S(L)}, {@code U(L)}.
     * Afterwards the slot still represents {@code S(L)} until {@link #commit}.
     */
    void verify(MambaStatePool pool, int slot, RecurrentOps ops, RecurrentRow row, Tensor y);

    /**
     * Saves {@code S(L + tokens)} and {@code U(L + tokens)} of the row just verified into
     * {@code target} (layout flag included), for {@code 1 ≤ tokens ≤ T}. Call before {@link #commit}.
     */
    void snapshot(MambaStatePool pool, int slot, RecurrentOps[] layers, int tokens, int target);

    /** {@code accepted ∈ 1…T} tokens of the row just verified are kept. */
    void commit(MambaStatePool pool, int slot, RecurrentOps[] layers, int accepted);

    /**
     * Writes the committed {@code S(L)}, {@code U(L)} of {@code slot} into {@code target} (layout flag
     * included) without changing {@code slot} or its pending work.
     */
    void copyCommitted(MambaStatePool pool, int slot, RecurrentOps[] layers, int target);

    /** Makes the slot hold exactly {@code S(L)}, {@code U(L)} (for copies, prefill and comparisons). */
    void settle(MambaStatePool pool, int slot, RecurrentOps[] layers);

    /**
     * {@link #verify} of {@code R} rows at once: row r of slot {@code slots[r]} owns token rows
     * {@code r·T … r·T+T−1} of {@code rows} and {@code y}; its first {@code lengths[r]} tokens are real,
     * the rest padding that no commit will accept. A strategy that overrides this issues one launch
     * per operation for all rows; the default verifies row by row.
     */
    default void verifyBatch(MambaStatePool pool, int[] slots, RecurrentOps ops, RecurrentRow rows, int[] lengths,
                             int tokensPerRow, Tensor y) {
        Backend backend = pool.backend();
        for (int r = 0; r < slots.length; r++) {
            Tensor[] in = new Tensor[3];
            Tensor[] stacked = {rows.raw(), rows.side1(), rows.side2()};
            for (int i = 0; i < 3; i++) {
                if (stacked[i] != null) {
                    in[i] = backend.zeros(tokensPerRow, stacked[i].cols());
                    backend.copyRows(stacked[i], r * tokensPerRow, in[i], 0, tokensPerRow);
                }
            }
            Tensor yr = backend.zeros(tokensPerRow, y.cols());
            verify(pool, slots[r], ops, new RecurrentRow(in[0], in[1], in[2]), yr);
            backend.copyRows(yr, 0, y, r * tokensPerRow, tokensPerRow);
            backend.free(yr);
            for (Tensor t : in) {
                if (t != null) {
                    backend.free(t);
                }
            }
        }
    }

    /** {@link #commit} of every row of a step: {@code accepted[i]} tokens for {@code slots[i]}. */
    default void commitBatch(MambaStatePool pool, int[] slots, RecurrentOps[] layers, int[] accepted) {
        for (int i = 0; i < slots.length; i++) {
            commit(pool, slots[i], layers, accepted[i]);
        }
    }
}
