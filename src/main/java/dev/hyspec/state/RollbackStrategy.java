package dev.hyspec.state;

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
}
