package dev.hyspec.backend;

/**
 * Shape of one Gated DeltaNet state update: {@code Hk} key heads of dim {@code Dk}, {@code Hv}
 * value heads of dim {@code Dv}; value head {@code h} reads key head {@code h / (Hv/Hk)}.
 */
public record GdnDims(int numKeyHeads, int numValueHeads, int keyHeadDim, int valueHeadDim) {
    public int keyDim() {
        return numKeyHeads * keyHeadDim;
    }

    public int valueDim() {
        return numValueHeads * valueHeadDim;
    }

    public int convDim() {
        return 2 * keyDim() + valueDim();
    }
}
