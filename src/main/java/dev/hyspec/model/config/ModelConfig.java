package dev.hyspec.model.config;

import java.util.List;

/**
 * Everything the model code needs from a checkpoint's {@code config.json}, in one shape for all
 * architectures. Decoder layers are flattened into {@link Block}s: Nemotron-H and Mamba2 have one
 * block per layer; a Qwen decoder layer is two (token mixer, then MLP/MoE).
 *
 * @param blocks       pre-norm blocks in execution order
 * @param normPlusOne  RMSNorm weights are stored zero-centred and applied as {@code 1 + w} (Qwen)
 * @param mamba2       present when any block is {@link BlockKind#MAMBA2}
 * @param gdn          present when any block is {@link BlockKind#GATED_DELTA_NET}
 * @param attention    present when any block is {@link BlockKind#ATTENTION}
 * @param mlp          present when any block is {@link BlockKind#MLP}
 * @param moe          present when any block is {@link BlockKind#MOE}
 */
public record ModelConfig(
        Architecture architecture,
        int vocabSize,
        int hiddenSize,
        float normEps,
        boolean normPlusOne,
        boolean tieWordEmbeddings,
        String embeddingName,
        String finalNormName,
        List<Block> blocks,
        Mamba2Spec mamba2,
        GdnSpec gdn,
        AttentionSpec attention,
        MlpSpec mlp,
        MoeSpec moe,
        int maxPositionEmbeddings,
        List<Integer> eosTokenIds,
        Integer bosTokenId) {

    /**
     * One pre-norm residual block.
     *
     * @param index      position in {@link #blocks()}
     * @param layer      the decoder layer it belongs to
     * @param normName   its RMSNorm weight
     * @param prefix     its mixer's weight-name prefix, ending in "."
     */
    public record Block(int index, int layer, BlockKind kind, String normName, String prefix) {}

    /**
     * Mamba2 mixer shape. {@code H} heads of dim {@code P}, state dim {@code N}, {@code G} groups,
     * conv width {@code W}. The gated RMSNorm normalises groups of {@code normGroupSize} channels.
     * {@code dt = clamp(softplus(dt + dt_bias), dtMin, dtMax)}.
     */
    public record Mamba2Spec(int numHeads, int headDim, int stateSize, int nGroups, int convKernel,
                             boolean convBias, boolean projBias, int normGroupSize, float dtMin, float dtMax) {
        public int innerSize() {
            return numHeads * headDim;
        }

        /** Channels through the causal conv: {@code x (H·P) | B (G·N) | C (G·N)}. */
        public int convDim() {
            return innerSize() + 2 * nGroups * stateSize;
        }
    }

    /** Gated DeltaNet shape: {@code Hk} key heads of {@code Dk}, {@code Hv} value heads of {@code Dv}. */
    public record GdnSpec(int numKeyHeads, int numValueHeads, int keyHeadDim, int valueHeadDim, int convKernel) {
        public int keyDim() {
            return numKeyHeads * keyHeadDim;
        }

        public int valueDim() {
            return numValueHeads * valueHeadDim;
        }

        /** Channels through the causal conv: {@code q (Hk·Dk) | k (Hk·Dk) | v (Hv·Dv)}. */
        public int convDim() {
            return 2 * keyDim() + valueDim();
        }
    }

    /**
     * Attention shape. {@code rotaryDim = 0} means no RoPE (Nemotron-H); {@code outputGate} is
     * Qwen's sigmoid gate packed with the query projection; {@code qkNorm} normalises q and k per head.
     */
    public record AttentionSpec(int numHeads, int numKvHeads, int headDim, int rotaryDim, float ropeTheta,
                                boolean outputGate, boolean qkNorm, boolean bias) {}

    /** Dense MLP: {@code relu2} (up, down) or {@code swiglu} (gate, up, down). */
    public record MlpSpec(int intermediateSize, Activation activation, boolean bias) {}

    /**
     * Sparse MoE. Qwen3-Next: softmax router, top-k, optional renormalisation, SwiGLU experts, a
     * sigmoid-gated shared expert. Nemotron-H: sigmoid router with a score-correction bias and group
     * selection, relu² experts, an ungated shared expert, scaled by {@code routedScalingFactor}.
     */
    public record MoeSpec(int numExperts, int topK, boolean normTopkProb, int expertIntermediateSize,
                          int sharedIntermediateSize, Activation activation, boolean sigmoidRouter,
                          int nGroup, int topkGroup, float routedScalingFactor) {}

    public enum Activation { SILU, RELU2 }
}
