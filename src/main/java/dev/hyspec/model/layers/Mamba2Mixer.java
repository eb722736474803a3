package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.ModelConfig.Mamba2Spec;

/**
 * Mamba2 mixer (Dao &amp; Gu 2024, "Transformers are SSMs", §7; HF {@code modeling_mamba2.py} /
 * {@code modeling_nemotron_h.py}): {@code in_proj → [z | xBC | dt]}, causal conv + SiLU over xBC,
 * the selective-state recurrence, gated RMSNorm {@code norm(y ⊙ silu(z))}, {@code out_proj}.
 * The recurrence runs token by token for prefill and decode alike, so both share one exact path.
 */
public final class Mamba2Mixer implements Mixer {
    private final Backend backend;
    private final Mamba2Spec spec;
    private final Mamba2Dims dims;
    private final float eps;
    private final Tensor zProj;     // [H·P, D]
    private final Tensor xBCProj;   // [convDim, D]
    private final Tensor dtProj;    // [H, D]
    private final Tensor zBias, xBCBias, dtProjBias;  // null unless the projection has a bias
    private final Tensor convWeight;  // [convDim, W]
    private final Tensor convBias;    // [convDim] or null
    private final Tensor dtBias;      // [H]
    private final Tensor aLog;        // [H]
    private final Tensor d;           // [H]
    private final Tensor normWeight;  // [H·P]
    private final Tensor outProj;     // [D, H·P]

    public Mamba2Mixer(Weights w, String prefix, Mamba2Spec spec, int hidden, float eps) {
        this.backend = w.backend();
        this.spec = spec;
        this.eps = eps;
        this.dims = new Mamba2Dims(spec.numHeads(), spec.headDim(), spec.stateSize(), spec.nGroups(), spec.dtMin(),
                spec.dtMax());
        int inner = spec.innerSize();
        int conv = spec.convDim();
        int heads = spec.numHeads();
        int projRows = inner + conv + heads;
        String in = prefix + "in_proj.weight";
        zProj = w.matrixRows(in, projRows, hidden, 0, inner);
        xBCProj = w.matrixRows(in, projRows, hidden, inner, conv);
        dtProj = w.matrixRows(in, projRows, hidden, inner + conv, heads);
        String inBias = prefix + "in_proj.bias";
        boolean hasBias = spec.projBias() && w.has(inBias);
        zBias = hasBias ? w.vectorSlice(inBias, projRows, 0, inner) : null;
        xBCBias = hasBias ? w.vectorSlice(inBias, projRows, inner, conv) : null;
        dtProjBias = hasBias ? w.vectorSlice(inBias, projRows, inner + conv, heads) : null;
        convWeight = w.vector(prefix + "conv1d.weight", conv, 1, spec.convKernel());
        convBias = spec.convBias() ? w.vector(prefix + "conv1d.bias", conv) : null;
        dtBias = w.vector(prefix + "dt_bias", heads);
        aLog = w.vector(prefix + "A_log", heads);
        d = w.vector(prefix + "D", heads);
        normWeight = w.vector(prefix + "norm.weight", inner);
        outProj = w.matrix(prefix + "out_proj.weight", hidden, inner);
    }

    @Override
    public RecurrentState newState() {
        return new RecurrentState(backend.zeros(spec.convDim(), spec.convKernel() - 1),
                backend.zeros(spec.numHeads(), spec.headDim(), spec.stateSize()));
    }

    @Override
    public Tensor forward(Tensor x, LayerState state, int pastLen, int[] positions) {
        RecurrentState st = (RecurrentState) state;
        int tokens = x.rows();
        // in_proj: z [T, H·P], xBC [T, convDim], dt [T, H]
        Tensor z = backend.zeros(tokens, spec.innerSize());
        Tensor xBC = backend.zeros(tokens, spec.convDim());
        Tensor dt = backend.zeros(tokens, spec.numHeads());
        backend.matmul(x, zProj, zBias, z);
        backend.matmul(x, xBCProj, xBCBias, xBC);
        backend.matmul(x, dtProj, dtProjBias, dt);
        // causal conv + SiLU, continuing from U(L)
        Tensor xBCc = backend.zeros(tokens, spec.convDim());
        backend.causalConv1d(xBC, st.conv(), convWeight, convBias, xBCc, true);
        // selective state update S(L) → S(L+T), y [T, H·P]
        Tensor y = backend.zeros(tokens, spec.innerSize());
        backend.mamba2Scan(st.ssm(), dev.hyspec.backend.StateLayout.VK, xBCc, dt, dtBias, aLog, d, dims, y);
        // gated RMSNorm: norm(y ⊙ silu(z))
        backend.gatedRmsNorm(y, z, normWeight, spec.normGroupSize(), eps, true, y);
        Tensor out = backend.zeros(tokens, outProj.rows());
        backend.matmul(y, outProj, null, out);
        for (Tensor t : new Tensor[] {z, xBC, dt, xBCc, y}) {
            backend.free(t);
        }
        return out;
    }
}
