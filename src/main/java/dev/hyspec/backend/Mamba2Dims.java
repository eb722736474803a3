package dev.hyspec.backend;

/**
 * Shape of one Mamba2 state update: {@code H} heads of dim {@code P}, state dim {@code N},
 * {@code G} groups (head {@code h} reads group {@code h / (H/G)}), and the clamp on
 * {@code dt = softplus(dt_raw + dt_bias)}.
 */
public record Mamba2Dims(int numHeads, int headDim, int stateSize, int nGroups, float dtMin, float dtMax) {
    public int innerSize() {
        return numHeads * headDim;
    }

    public int convDim() {
        return innerSize() + 2 * nGroups * stateSize;
    }
}
