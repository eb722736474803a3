package dev.hyspec.state;

import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;

/**
 * The state operations of one recurrent layer (Mamba2 or Gated DeltaNet), bound to its weights, as
 * the rollback strategies use them. {@code conv} is the row's conv output; states are in the
 * layout given.
 */
public interface RecurrentOps {
    /** This layer's index among the pool's recurrent layers. */
    int poolLayer();

    RecurrentShape shape();

    /** Causal conv + SiLU of {@code raw [T, C]} continuing {@code window}; moves the window when {@code advance}. */
    void convolve(Tensor raw, Tensor window, boolean advance, Tensor out);

    /** Advances {@code state} over the row in place and writes the outputs. */
    void scan(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor y);

    /** Outputs of the row; {@code state} only read; the state after token t goes to {@code states[t]}. */
    void scanStates(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor[] states, Tensor y);

    /** Advances {@code state} over the first {@code count} rows of a replay history. */
    void replay(Tensor state, StateLayout layout, Tensor history, int count);

    /** Outputs of the row from {@code state} (only read), and the row's replay history. */
    void replayOutputs(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor history, Tensor y);

    // Batched forms (R rows of T tokens stacked [R·T, ·] in the row's tensors; see Backend's batched
    // operations): per-row states and buffers come as arrays indexed by row.

    /** {@link #convolve} of every row without advancing: row r continues {@code windows[r]}. */
    void convolveBatch(Tensor raw, Tensor[] windows, int tokensPerRow, Tensor out);

    /**
     * The replay verify's conv of every row ({@link dev.hyspec.backend.Backend#convStepBatch}):
     * {@code windows[r]} moves past the first {@code counts[r]} rows of {@code previous[r]}, the rows'
     * raw inputs go to {@code next[r]}, then {@link #convolveBatch}.
     */
    void convolveStepBatch(Tensor raw, Tensor[] windows, Tensor[] previous, int[] counts, Tensor[] next,
                           int tokensPerRow, Tensor out);

    /** {@link #scanStates} of every row: the state after row r's token t goes to {@code scratch[r][t]}. */
    void scanStatesBatch(Tensor[] states, StateLayout layout, Tensor conv, RecurrentRow rows, Tensor[][] scratch,
                         int tokensPerRow, Tensor y);

    /**
     * {@link #replay} of {@code counts[r]} rows of {@code previous[r]} onto {@code states[r]}, then
     * {@link #replayOutputs} of every row from the replayed state with its history in {@code next[r]}.
     */
    void replayVerifyBatch(Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts, Tensor conv,
                           RecurrentRow rows, Tensor[] next, int tokensPerRow, Tensor y);
}
