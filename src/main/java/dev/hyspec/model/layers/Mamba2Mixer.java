package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.BlockKind;
import dev.hyspec.model.config.ModelConfig.Mamba2Spec;
import dev.hyspec.state.RecurrentRow;
import dev.hyspec.state.RecurrentShape;

/**
 * Mamba2 mixer (Dao &amp; Gu 2024, "Transformers are SSMs", §7; HF {@code modeling_mamba2.py} /
 * {@code modeling_nemotron_h.py}): {@code in_proj → [z | xBC | dt]}, causal conv + SiLU over xBC,
 * the selective-state recurrence, gated RMSNorm {@code norm(y ⊙ silu(z))}, {@code out_proj}.
 * The recurrence runs token by token for prefill and decode alike, so both share one exact path.
 * Native state layout: {@code VK} ({@code [H, P, N]}, as mamba_ssm).
 */
public final class Mamba2Mixer extends RecurrentMixer {
    private final RecurrentShape shape;
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

    public Mamba2Mixer(Weights w, String prefix, Mamba2Spec spec, int hidden, float eps, int poolLayer) {
        super(w.backend(), poolLayer);
        this.spec = spec;
        this.eps = eps;
        this.dims = new Mamba2Dims(spec.numHeads(), spec.headDim(), spec.stateSize(), spec.nGroups(), spec.dtMin(),
                spec.dtMax());
        int inner = spec.innerSize();
        int conv = spec.convDim();
        int heads = spec.numHeads();
        this.shape = new RecurrentShape(BlockKind.MAMBA2, conv, spec.convKernel() - 1, heads, spec.stateSize(),
                spec.headDim(), inner + spec.nGroups() * spec.stateSize() + 2 * heads);
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
    public RecurrentShape shape() {
        return shape;
    }

    @Override
    protected Projections project(Tensor x) {
        int tokens = x.rows();
        Tensor z = backend.empty(tokens, spec.innerSize());
        Tensor xBC = backend.empty(tokens, spec.convDim());
        Tensor dt = backend.empty(tokens, spec.numHeads());
        backend.matmuls(x, new Tensor[] {zProj, xBCProj, dtProj}, new Tensor[] {zBias, xBCBias, dtProjBias},
                new Tensor[] {z, xBC, dt});
        return new Projections(xBC, dt, null, z);
    }

    @Override
    protected int outputWidth() {
        return spec.innerSize();
    }

    @Override
    protected Tensor finish(Tensor y, Projections p) {
        // gated RMSNorm: norm(y ⊙ silu(z)), then out_proj
        backend.gatedRmsNorm(y, p.gate(), normWeight, spec.normGroupSize(), eps, true, y);
        Tensor out = backend.empty(y.rows(), outProj.rows());
        backend.matmul(y, outProj, null, out);
        return out;
    }

    @Override
    public void convolve(Tensor raw, Tensor window, boolean advance, Tensor out) {
        backend.causalConv1d(raw, window, convWeight, convBias, out, advance);
    }

    @Override
    public void scan(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor y) {
        backend.mamba2Scan(state, layout, conv, row.side1(), dtBias, aLog, d, dims, y);
    }

    @Override
    public void scanStates(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor[] states,
                           Tensor y) {
        backend.mamba2ScanStates(state, layout, conv, row.side1(), dtBias, aLog, d, dims, states, y);
    }

    @Override
    public void replay(Tensor state, StateLayout layout, Tensor history, int count) {
        backend.mamba2Replay(state, layout, history, count, dims);
    }

    @Override
    public void replayOutputs(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor history,
                              Tensor y) {
        backend.mamba2ReplayOutputs(state, layout, conv, row.side1(), dtBias, aLog, d, dims, history, y);
    }

    @Override
    public void convolveBatch(Tensor raw, Tensor[] windows, int tokensPerRow, Tensor out) {
        backend.causalConv1dBatch(raw, windows, convWeight, convBias, tokensPerRow, out, false);
    }

    @Override
    public void convolveStepBatch(Tensor raw, Tensor[] windows, Tensor[] previous, int[] counts, Tensor[] next,
                                  int tokensPerRow, Tensor out) {
        backend.convStepBatch(raw, windows, previous, counts, next, convWeight, convBias, tokensPerRow, out);
    }

    @Override
    public void scanStatesBatch(Tensor[] states, StateLayout layout, Tensor conv, RecurrentRow rows,
                                Tensor[][] scratch, int tokensPerRow, Tensor y) {
        backend.mamba2ScanStatesBatch(states, layout, conv, rows.side1(), dtBias, aLog, d, dims, scratch, tokensPerRow,
                y);
    }

    @Override
    public void replayVerifyBatch(Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts, Tensor conv,
                                  RecurrentRow rows, Tensor[] next, int tokensPerRow, Tensor y) {
        backend.mamba2ReplayVerifyBatch(states, layout, previous, counts, conv, rows.side1(), dtBias, aLog, d, dims,
                next, tokensPerRow, y);
    }
}
