package dev.hyspec.backend;

/**
 * One projection of every routed expert of a MoE layer, as {@link Backend#moeExpertMatmul} takes
 * it: {@code E} weights {@code [N, D]} of one shape and dtype. Made once at load by
 * {@link Backend#expertWeights}; a GPU keeps a device table of the weights' addresses beside them
 * (weights never move), so one launch reaches every expert.
 */
public class ExpertWeights {
    private final Tensor[] weights;   // [E] of [N, D]

    public ExpertWeights(Tensor[] weights) {
        if (weights.length == 0) {
            throw new IllegalArgumentException("a MoE layer needs at least one expert");
        }
        int[] shape = weights[0].shape();
        for (Tensor w : weights) {
            if (!java.util.Arrays.equals(w.shape(), shape) || shape.length != 2) {
                throw new IllegalArgumentException("expert weights differ in shape or are not matrices: "
                        + java.util.Arrays.toString(shape) + " vs " + java.util.Arrays.toString(w.shape()));
            }
        }
        this.weights = weights.clone();
    }

    /** Expert {@code e}'s weight {@code [N, D]}. */
    public Tensor weight(int e) {
        return weights[e];
    }

    /** {@code E}. */
    public int numExperts() {
        return weights.length;
    }

    /** {@code N}: output features of each expert's product. */
    public int rows() {
        return weights[0].rows();
    }

    /** {@code D}: input features. */
    public int cols() {
        return weights[0].cols();
    }
}
