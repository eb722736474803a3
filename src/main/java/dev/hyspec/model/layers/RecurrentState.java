package dev.hyspec.model.layers;

import dev.hyspec.backend.Tensor;
import java.util.List;

/**
 * The state of one recurrent layer (Mamba2 or Gated DeltaNet) for one sequence after its first
 * {@code n} tokens: {@code U(n)}, the last {@code W−1} pre-conv inputs, and {@code S(n)}.
 *
 * @param conv  {@code [convDim, W−1]}: per channel, the last W−1 inputs, oldest first
 * @param ssm   Mamba2 {@code [H, P, N]}; Gated DeltaNet {@code [Hv, Dk, Dv]}
 */
public record RecurrentState(Tensor conv, Tensor ssm) implements LayerState {
    @Override
    public List<Tensor> tensors() {
        return List.of(conv, ssm);
    }
}
