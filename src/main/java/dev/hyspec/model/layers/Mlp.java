package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.state.StateStore;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.ModelConfig.Activation;

/**
 * Dense MLP: relu² ({@code down(relu(up(x))²)}, Nemotron-H) or SwiGLU
 * ({@code down(silu(gate(x)) · up(x))}, Qwen). Also the experts of {@link SparseMoe}.
 */
public final class Mlp implements Mixer {
    private final Backend backend;
    private final Activation activation;
    private final Tensor gateProj;  // [I, D], SwiGLU only
    private final Tensor upProj;    // [I, D]
    private final Tensor downProj;  // [D, I]
    private final Tensor upBias, downBias;  // null without mlp_bias

    public Mlp(Weights w, String prefix, int hidden, int intermediate, Activation activation, boolean bias) {
        this.backend = w.backend();
        this.activation = activation;
        gateProj = activation == Activation.SILU ? w.matrix(prefix + "gate_proj.weight", intermediate, hidden) : null;
        upProj = w.matrix(prefix + "up_proj.weight", intermediate, hidden);
        downProj = w.matrix(prefix + "down_proj.weight", hidden, intermediate);
        if (bias && activation == Activation.SILU) {
            throw new IllegalArgumentException("biased SwiGLU MLPs are not supported");
        }
        upBias = bias ? w.vector(prefix + "up_proj.bias", intermediate) : null;
        downBias = bias ? w.vector(prefix + "down_proj.bias", hidden) : null;
    }

    /** The gate projection {@code [I, D]} (SwiGLU only, else null), for {@link SparseMoe}'s expert tables. */
    Tensor gateProj() {
        return gateProj;
    }

    /** The up projection {@code [I, D]}. */
    Tensor upProj() {
        return upProj;
    }

    /** The down projection {@code [D, I]}. */
    Tensor downProj() {
        return downProj;
    }

    @Override
    public Tensor forward(Tensor x, ForwardBatch batch, StateStore store) {
        int tokens = x.rows();
        Tensor h = backend.empty(tokens, upProj.rows());       // [T, I]
        if (activation == Activation.SILU) {
            Tensor g = backend.empty(tokens, gateProj.rows());  // [T, I]
            backend.matmuls(x, new Tensor[] {upProj, gateProj}, new Tensor[] {upBias, null}, new Tensor[] {h, g});
            backend.siluMul(g, h, h);
            backend.free(g);
        } else {
            backend.matmulRelu2(x, upProj, upBias, h);
        }
        Tensor out = backend.empty(tokens, downProj.rows());  // [T, D]
        backend.matmul(h, downProj, downBias, out);
        backend.free(h);
        return out;
    }
}
