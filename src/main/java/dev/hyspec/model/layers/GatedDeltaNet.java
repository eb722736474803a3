package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.Architecture;
import dev.hyspec.model.config.BlockKind;
import dev.hyspec.model.config.ModelConfig.GdnSpec;
import dev.hyspec.state.RecurrentRow;
import dev.hyspec.state.RecurrentShape;

/**
 * Gated DeltaNet (Yang et al. 2025, "Gated Delta Networks"; HF {@code modeling_qwen3_next.py},
 * {@code modeling_qwen3_5.py}): projections to {@code q, k, v, z, b, a}, causal conv + SiLU over
 * {@code [q|k|v]}, the gated delta rule, gated RMSNorm per value head, {@code out_proj}.
 *
 * <p>Qwen3-Next packs {@code in_proj_qkvz} and {@code in_proj_ba} per key-head group
 * ({@code [q_g | k_g | v_g | z_g]}); the loader gathers those rows into Qwen3.5's flat
 * {@code q | k | v} order so one code path serves both. Native state layout: {@code KV}
 * ({@code [Hv, Dk, Dv]}, as HF and fla).
 */
public final class GatedDeltaNet extends RecurrentMixer {
    private final RecurrentShape shape;
    private final GdnSpec spec;
    private final GdnDims dims;
    private final float eps;
    private final Tensor qkvProj;     // [2·Hk·Dk + Hv·Dv, D]
    private final Tensor zProj;       // [Hv·Dv, D]
    private final Tensor bProj;       // [Hv, D]
    private final Tensor aProj;       // [Hv, D]
    private final Tensor convWeight;  // [convDim, 1, W]
    private final Tensor dtBias;      // [Hv]
    private final Tensor aLog;        // [Hv]
    private final Tensor normWeight;  // [Dv]
    private final Tensor outProj;     // [D, Hv·Dv]

    public GatedDeltaNet(Weights w, String prefix, GdnSpec spec, Architecture arch, int hidden, float eps,
                         int poolLayer) {
        super(w.backend(), poolLayer);
        this.spec = spec;
        this.eps = eps;
        this.dims = new GdnDims(spec.numKeyHeads(), spec.numValueHeads(), spec.keyHeadDim(), spec.valueHeadDim());
        int conv = spec.convDim();
        int hv = spec.numValueHeads();
        this.shape = new RecurrentShape(BlockKind.GATED_DELTA_NET, conv, spec.convKernel() - 1, hv,
                spec.keyHeadDim(), spec.valueHeadDim(), spec.numKeyHeads() * spec.keyHeadDim() + spec.valueDim() + 2 * hv);
        if (arch == Architecture.QWEN3_NEXT) {
            int[][] order = qwen3NextOrder(spec);
            int qkvzRows = conv + spec.valueDim();
            qkvProj = w.matrixRows(prefix + "in_proj_qkvz.weight", qkvzRows, hidden, order[0]);
            zProj = w.matrixRows(prefix + "in_proj_qkvz.weight", qkvzRows, hidden, order[1]);
            bProj = w.matrixRows(prefix + "in_proj_ba.weight", 2 * hv, hidden, order[2]);
            aProj = w.matrixRows(prefix + "in_proj_ba.weight", 2 * hv, hidden, order[3]);
        } else {
            qkvProj = w.matrix(prefix + "in_proj_qkv.weight", conv, hidden);
            zProj = w.matrix(prefix + "in_proj_z.weight", spec.valueDim(), hidden);
            bProj = w.matrix(prefix + "in_proj_b.weight", hv, hidden);
            aProj = w.matrix(prefix + "in_proj_a.weight", hv, hidden);
        }
        convWeight = w.vector(prefix + "conv1d.weight", conv, 1, spec.convKernel());
        dtBias = w.vector(prefix + "dt_bias", hv);
        aLog = w.vector(prefix + "A_log", hv);
        normWeight = w.vector(prefix + "norm.weight", spec.valueHeadDim());
        outProj = w.matrix(prefix + "out_proj.weight", hidden, spec.valueDim());
    }

    /**
     * Row indices into Qwen3-Next's grouped projections: {@code [qkv rows, z rows, b rows, a rows]}.
     * Key head {@code g} owns {@code [q (Dk) | k (Dk) | v (r·Dv) | z (r·Dv)]} of in_proj_qkvz and
     * {@code [b (r) | a (r)]} of in_proj_ba, with {@code r = Hv/Hk} value heads per key head
     * (HF {@code fix_query_key_value_ordering}).
     */
    static int[][] qwen3NextOrder(GdnSpec s) {
        int hk = s.numKeyHeads();
        int dk = s.keyHeadDim();
        int r = s.numValueHeads() / hk;
        int vPerGroup = r * s.valueHeadDim();
        int group = 2 * dk + 2 * vPerGroup;
        int[] qkv = new int[s.convDim()];
        int[] z = new int[s.valueDim()];
        int[] b = new int[s.numValueHeads()];
        int[] a = new int[s.numValueHeads()];
        int i = 0;
        for (int part = 0; part < 2; part++) {          // all q heads, then all k heads
            for (int g = 0; g < hk; g++) {
                for (int j = 0; j < dk; j++) {
                    qkv[i++] = g * group + part * dk + j;
                }
            }
        }
        for (int g = 0; g < hk; g++) {
            for (int j = 0; j < vPerGroup; j++) {
                qkv[i++] = g * group + 2 * dk + j;
                z[g * vPerGroup + j] = g * group + 2 * dk + vPerGroup + j;
            }
            for (int j = 0; j < r; j++) {
                b[g * r + j] = g * 2 * r + j;
                a[g * r + j] = g * 2 * r + r + j;
            }
        }
        return new int[][] {qkv, z, b, a};
    }

    @Override
    public RecurrentShape shape() {
        return shape;
    }

    @Override
    protected Projections project(Tensor x) {
        int tokens = x.rows();
        int hv = spec.numValueHeads();
        Tensor qkv = backend.empty(tokens, spec.convDim());
        Tensor z = backend.empty(tokens, spec.valueDim());
        Tensor b = backend.empty(tokens, hv);
        Tensor a = backend.empty(tokens, hv);
        backend.matmuls(x, new Tensor[] {qkvProj, zProj, bProj, aProj}, null, new Tensor[] {qkv, z, b, a});
        return new Projections(qkv, a, b, z);
    }

    @Override
    protected int outputWidth() {
        return spec.valueDim();
    }

    @Override
    protected Tensor finish(Tensor o, Projections p) {
        // gated RMSNorm per value head: norm(o) · w · silu(z), then out_proj
        backend.gatedRmsNorm(o, p.gate(), normWeight, spec.valueHeadDim(), eps, false, o);
        Tensor out = backend.empty(o.rows(), outProj.rows());
        backend.matmul(o, outProj, null, out);
        return out;
    }

    @Override
    public void convolve(Tensor raw, Tensor window, boolean advance, Tensor out) {
        backend.causalConv1d(raw, window, convWeight, null, out, advance);
    }

    @Override
    public void scan(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor y) {
        backend.gatedDeltaScan(state, layout, conv, row.side1(), row.side2(), aLog, dtBias, dims, y);
    }

    @Override
    public void scanStates(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor[] states,
                           Tensor y) {
        backend.gatedDeltaScanStates(state, layout, conv, row.side1(), row.side2(), aLog, dtBias, dims, states, y);
    }

    @Override
    public void replay(Tensor state, StateLayout layout, Tensor history, int count) {
        backend.gatedDeltaReplay(state, layout, history, count, dims);
    }

    @Override
    public void replayOutputs(Tensor state, StateLayout layout, Tensor conv, RecurrentRow row, Tensor history,
                              Tensor y) {
        backend.gatedDeltaReplayOutputs(state, layout, conv, row.side1(), row.side2(), aLog, dtBias, dims, history, y);
    }

    @Override
    public void convolveBatch(Tensor raw, Tensor[] windows, int tokensPerRow, Tensor out) {
        backend.causalConv1dBatch(raw, windows, convWeight, null, tokensPerRow, out, false);
    }

    @Override
    public void convolveStepBatch(Tensor raw, Tensor[] windows, Tensor[] previous, int[] counts, Tensor[] next,
                                  int tokensPerRow, Tensor out) {
        backend.convStepBatch(raw, windows, previous, counts, next, convWeight, null, tokensPerRow, out);
    }

    @Override
    public void scanStatesBatch(Tensor[] states, StateLayout layout, Tensor conv, RecurrentRow rows,
                                Tensor[][] scratch, int tokensPerRow, Tensor y) {
        backend.gatedDeltaScanStatesBatch(states, layout, conv, rows.side1(), rows.side2(), aLog, dtBias, dims, scratch,
                tokensPerRow, y);
    }

    @Override
    public void replayVerifyBatch(Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts, Tensor conv,
                                  RecurrentRow rows, Tensor[] next, int tokensPerRow, Tensor y) {
        backend.gatedDeltaReplayVerifyBatch(states, layout, previous, counts, conv, rows.side1(), rows.side2(), aLog,
                dtBias, dims, next, tokensPerRow, y);
    }
}
