package dev.hyspec.state;

import dev.hyspec.model.config.BlockKind;

/**
 * What the state pool needs to know about one recurrent layer: the conv window
 * {@code [convDim, window]} ({@code window = W−1}), the state matrices {@code heads × [key, value]}
 * (Mamba2: key = N, value = P; Gated DeltaNet: key = Dk, value = Dv) and the width of one replay
 * history row (see {@link dev.hyspec.backend.Backend}).
 */
public record RecurrentShape(BlockKind kind, int convDim, int window, int heads, int keyDim, int valueDim,
                             int historyWidth) {

    public long stateElements() {
        return (long) heads * keyDim * valueDim;
    }

    public long convElements() {
        return (long) convDim * window;
    }
}
