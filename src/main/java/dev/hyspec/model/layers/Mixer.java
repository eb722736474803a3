package dev.hyspec.model.layers;

import dev.hyspec.backend.Tensor;

/** What one block applies to its normalised input; the block adds the result to the residual. */
public interface Mixer {
    /**
     * @param x         {@code [T, D]}, already normalised by the block's RMSNorm
     * @param state     this block's state for the sequence (null for stateless mixers)
     * @param pastLen   tokens of the sequence already processed ({@code L})
     * @param positions {@code [T]}, the positions {@code L … L+T−1}
     * @return          {@code [T, D]}
     */
    Tensor forward(Tensor x, LayerState state, int pastLen, int[] positions);

    /** A zeroed state for a new sequence, or null when the mixer keeps none. */
    default LayerState newState() {
        return null;
    }
}
