package dev.hyspec.model.layers;

import java.util.List;
import dev.hyspec.backend.Tensor;

/** The per-sequence state one block keeps between steps (recurrent state or KV cache). */
public interface LayerState {
    /** The tensors that make up this state, in a fixed order (for copies and comparisons). */
    List<Tensor> tensors();
}
