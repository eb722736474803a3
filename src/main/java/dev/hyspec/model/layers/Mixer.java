package dev.hyspec.model.layers;

import dev.hyspec.backend.Tensor;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.state.StateStore;

/** What one block applies to its normalised input; the block adds the result to the residual. */
public interface Mixer {
    /**
     * @param x      {@code [N, D]}, the batch's token rows, already normalised by the block's RMSNorm
     * @param batch  which sequence, positions and state every token row belongs to
     * @param store  the recurrent state pool and KV pages the batch's rows refer to
     * @return       {@code [N, D]}
     */
    Tensor forward(Tensor x, ForwardBatch batch, StateStore store);
}
