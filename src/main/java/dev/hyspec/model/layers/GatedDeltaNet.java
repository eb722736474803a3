package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.Architecture;
import dev.hyspec.model.config.ModelConfig.GdnSpec;

/**
 * Gated DeltaNet (Yang et al. 2025, "Gated Delta Networks"; HF {@code modeling_qwen3_next.py},
 * {@code modeling_qwen3_5.py}): projections to {@code q, k, v, z, b, a}, causal conv + SiLU over
 * {@code [q|k|v]}, the gated delta rule, gated RMSNorm per value head, {@code out_proj}.
 *
 * <p>Qwen3-Next packs {@code in_proj_qkvz} and {@code in_proj_ba} per key-head group
 * ({@code [q_g | k_g | v_g | z_g]}); the loader gathers those rows into Qwen3.5's flat
 * {@code q | k | v} order so one code path serves both.
 */
public final class GatedDeltaNet implements Mixer {
    private final Backend backend;
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

    public GatedDeltaNet(Weights w, String prefix, GdnSpec spec, Architecture arch, int hidden, float eps) {
        this.backend = w.backend();
        this.spec = spec;
        this.eps = eps;
        this.dims = new GdnDims(spec.numKeyHeads(), spec.numValueHeads(), spec.keyHeadDim(), spec.valueHeadDim());
        int conv = spec.convDim();
        int hv = spec.numValueHeads();
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
    public RecurrentState newState() {
        return new RecurrentState(backend.zeros(spec.convDim(), spec.convKernel() - 1),
                backend.zeros(spec.numValueHeads(), spec.keyHeadDim(), spec.valueHeadDim()));
    }

    @Override
    public Tensor forward(Tensor x, LayerState state, int pastLen, int[] positions) {
        RecurrentState st = (RecurrentState) state;
        int tokens = x.rows();
        int hv = spec.numValueHeads();
        // projections: qkv [T, convDim], z [T, Hv·Dv], b, a [T, Hv]
        Tensor qkv = backend.zeros(tokens, spec.convDim());
        Tensor z = backend.zeros(tokens, spec.valueDim());
        Tensor b = backend.zeros(tokens, hv);
        Tensor a = backend.zeros(tokens, hv);
        backend.matmul(x, qkvProj, null, qkv);
        backend.matmul(x, zProj, null, z);
        backend.matmul(x, bProj, null, b);
        backend.matmul(x, aProj, null, a);
        // causal conv + SiLU over [q|k|v], continuing from U(L)
        Tensor qkvc = backend.zeros(tokens, spec.convDim());
        backend.causalConv1d(qkv, st.conv(), convWeight, null, qkvc, true);
        // gated delta rule S(L) → S(L+T), o [T, Hv·Dv]
        Tensor o = backend.zeros(tokens, spec.valueDim());
        backend.gatedDeltaScan(st.ssm(), dev.hyspec.backend.StateLayout.KV, qkvc, a, b, aLog, dtBias, dims, o);
        // gated RMSNorm per value head: norm(o) · w · silu(z)
        backend.gatedRmsNorm(o, z, normWeight, spec.valueHeadDim(), eps, false, o);
        Tensor out = backend.zeros(tokens, outProj.rows());
        backend.matmul(o, outProj, null, out);
        for (Tensor t : new Tensor[] {qkv, z, b, a, qkvc, o}) {
            backend.free(t);
        }
        return out;
    }
}
