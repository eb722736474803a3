package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.BatchRow;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.model.Weights;
import dev.hyspec.model.config.ModelConfig.AttentionSpec;
import dev.hyspec.state.KvBlockPool;
import dev.hyspec.state.StateStore;
import java.util.stream.IntStream;

/**
 * Causal GQA self-attention over the paged KV cache ({@link KvBlockPool}). Nemotron-H: plain q/k/v/o, no positional encoding.
 * Qwen3-Next / Qwen3.5: per-head RMSNorm ({@code 1 + w}) on q and k, (partial) RoPE, and an output
 * gate packed with the query projection per head as {@code [q_h (D) | gate_h (D)]}
 * (HF {@code Qwen3NextAttention}), applied as {@code o · σ(gate)} before {@code o_proj}.
 */
public final class Attention implements Mixer {
    private final Backend backend;
    private final int kvLayer;
    private final AttentionSpec spec;
    private final float eps;
    private final boolean normPlusOne;
    private final Tensor qProj;     // [H·D, hidden]
    private final Tensor gateProj;  // [H·D, hidden] or null
    private final Tensor kProj;     // [Hkv·D, hidden]
    private final Tensor vProj;     // [Hkv·D, hidden]
    private final Tensor oProj;     // [hidden, H·D]
    private final Tensor qBias, gateBias, kBias, vBias, oBias;  // null without attention_bias
    private final Tensor qNorm;     // [D] or null
    private final Tensor kNorm;     // [D] or null

    public Attention(Weights w, String prefix, AttentionSpec spec, int hidden, float eps, boolean normPlusOne,
                     int kvLayer) {
        this.backend = w.backend();
        this.kvLayer = kvLayer;
        this.spec = spec;
        this.eps = eps;
        this.normPlusOne = normPlusOne;
        int h = spec.numHeads();
        int dh = spec.headDim();
        int q = h * dh;
        int kv = spec.numKvHeads() * dh;
        String qName = prefix + "q_proj.weight";
        if (spec.outputGate()) {
            int[] queryRows = packedRows(h, dh, 0);
            int[] gateRows = packedRows(h, dh, dh);
            qProj = w.matrixRows(qName, 2 * q, hidden, queryRows);
            gateProj = w.matrixRows(qName, 2 * q, hidden, gateRows);
            qBias = spec.bias() ? gather(w, prefix + "q_proj.bias", 2 * q, queryRows) : null;
            gateBias = spec.bias() ? gather(w, prefix + "q_proj.bias", 2 * q, gateRows) : null;
        } else {
            qProj = w.matrix(qName, q, hidden);
            gateProj = null;
            qBias = spec.bias() ? w.vector(prefix + "q_proj.bias", q) : null;
            gateBias = null;
        }
        kProj = w.matrix(prefix + "k_proj.weight", kv, hidden);
        vProj = w.matrix(prefix + "v_proj.weight", kv, hidden);
        oProj = w.matrix(prefix + "o_proj.weight", hidden, q);
        kBias = spec.bias() ? w.vector(prefix + "k_proj.bias", kv) : null;
        vBias = spec.bias() ? w.vector(prefix + "v_proj.bias", kv) : null;
        oBias = spec.bias() ? w.vector(prefix + "o_proj.bias", hidden) : null;
        qNorm = spec.qkNorm() ? w.vector(prefix + "q_norm.weight", dh) : null;
        kNorm = spec.qkNorm() ? w.vector(prefix + "k_norm.weight", dh) : null;
    }

    /** Rows {@code h·2D + offset + [0, D)} for every head: one half of a per-head packed projection. */
    private static int[] packedRows(int heads, int headDim, int offset) {
        return IntStream.range(0, heads * headDim).map(i -> (i / headDim) * 2 * headDim + offset + i % headDim)
                .toArray();
    }

    private static Tensor gather(Weights w, String name, int n, int[] idx) {
        float[] all = w.backend().download(w.vector(name, n));
        float[] part = new float[idx.length];
        for (int i = 0; i < idx.length; i++) {
            part[i] = all[idx[i]];
        }
        return w.backend().upload(part, idx.length);
    }

    /** Keys/values per token: {@code Hkv·D}. */
    public int kvWidth() {
        return spec.numKvHeads() * spec.headDim();
    }

    @Override
    public Tensor forward(Tensor x, ForwardBatch batch, StateStore store) {
        KvBlockPool kv = store.kv();
        int tokens = x.rows();
        int dh = spec.headDim();
        int qWidth = spec.numHeads() * dh;
        // q [N, H·D], k, v [N, Hkv·D]
        Tensor q = backend.empty(tokens, qWidth);
        Tensor k = backend.empty(tokens, kvWidth());
        Tensor v = backend.empty(tokens, kvWidth());
        backend.matmuls(x, new Tensor[] {qProj, kProj, vProj}, new Tensor[] {qBias, kBias, vBias},
                new Tensor[] {q, k, v});
        // per-head q/k norm, then RoPE at every token row's own position
        if (spec.qkNorm()) {
            backend.rmsNorm(q, qNorm, dh, eps, normPlusOne, q);
            backend.rmsNorm(k, kNorm, dh, eps, normPlusOne, k);
        }
        if (spec.rotaryDim() > 0) {
            backend.rope(q, spec.numHeads(), dh, spec.rotaryDim(), spec.ropeTheta(), batch.positions());
            backend.rope(k, spec.numKvHeads(), dh, spec.rotaryDim(), spec.ropeTheta(), batch.positions());
        }
        // write every row's keys/values into its pages at L … L+T−1, attend causally over 0 … L+T−1
        Tensor o = backend.zeros(tokens, qWidth);
        if (batch.tokensPerRow() > 0) {
            // a uniform batch: every row in one launch; padding tokens write no KV and attend nothing
            backend.writeKvBatch(k, v, kv.keys(kvLayer), kv.values(kvLayer), batch.blockTables(), kv.pageSize(),
                    batch.starts(), batch.lengths(), batch.tokensPerRow());
            backend.pagedAttentionBatch(q, kv.keys(kvLayer), kv.values(kvLayer), batch.blockTables(), kv.pageSize(),
                    spec.numHeads(), spec.numKvHeads(), dh, batch.starts(), batch.lengths(), batch.tokensPerRow(), o);
        } else {
            writeAndAttendRows(q, k, v, o, batch, kv);
        }
        if (gateProj != null) {
            Tensor gate = backend.empty(tokens, qWidth);
            backend.matmul(x, gateProj, gateBias, gate);
            backend.sigmoidGate(o, gate, o);
            backend.free(gate);
        }
        Tensor out = backend.empty(tokens, oProj.rows());
        backend.matmul(o, oProj, oBias, out);
        for (Tensor t : new Tensor[] {q, k, v, o}) {
            backend.free(t);
        }
        return out;
    }

    /** A ragged batch: per row, write its keys/values at L … L+T−1 and attend causally over 0 … L+T−1. */
    private void writeAndAttendRows(Tensor q, Tensor k, Tensor v, Tensor o, ForwardBatch batch, KvBlockPool kv) {
        int dh = spec.headDim();
        int qWidth = spec.numHeads() * dh;
        boolean whole = batch.size() == 1;
        for (int r = 0; r < batch.size(); r++) {
            BatchRow row = batch.row(r);
            int off = batch.offset(r);
            int n = row.length();
            Tensor kr = whole ? k : rows(k, off, n);
            Tensor vr = whole ? v : rows(v, off, n);
            Tensor qr = whole ? q : rows(q, off, n);
            Tensor or = whole ? o : backend.zeros(n, qWidth);
            backend.writeKv(kr, vr, kv.keys(kvLayer), kv.values(kvLayer), row.blockTable(), kv.pageSize(), row.start());
            backend.pagedAttention(qr, kv.keys(kvLayer), kv.values(kvLayer), row.blockTable(), kv.pageSize(),
                    spec.numHeads(), spec.numKvHeads(), dh, row.start(), or);
            if (!whole) {
                backend.copyRows(or, 0, o, off, n);
                for (Tensor t : new Tensor[] {kr, vr, qr, or}) {
                    backend.free(t);
                }
            }
        }
    }

    private Tensor rows(Tensor t, int off, int n) {
        Tensor s = backend.zeros(n, t.cols());
        backend.copyRows(t, off, s, 0, n);
        return s;
    }
}
