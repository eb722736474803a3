package dev.hyspec.state;

import dev.hyspec.backend.Tensor;

/**
 * One row's inputs to a recurrent layer, as its projections produced them: {@code raw [T, convDim]}
 * the pre-conv channels, and the per-head side inputs (Mamba2: {@code dtRaw [T, H]}, no second;
 * Gated DeltaNet: {@code a [T, Hv]}, {@code b [T, Hv]}).
 */
public record RecurrentRow(Tensor raw, Tensor side1, Tensor side2) {
    public int tokens() {
        return raw.rows();
    }
}
