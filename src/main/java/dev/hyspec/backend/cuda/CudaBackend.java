package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.ExpertWeights;
import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.MoeRouting;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.nio.ByteBuffer;
import jcuda.Pointer;

/**
 * The GPU backend: the {@link Backend} operations as kernels from {@code src/native-kernels}, launched
 * through the JCuda driver API on one stream. Weights stay in their checkpoint dtype (bf16 on real
 * checkpoints) and are widened in registers; activations and recurrent state are float32 and every
 * product accumulates in float32, so the numbers follow the CPU reference to rounding.
 */
public final class CudaBackend implements Backend {
    /**
     * How matmuls treat activations: {@code BF16} rounds them to bfloat16 and runs prefill-shaped
     * products on tensor cores (the serving default); {@code FLOAT32} keeps them float32 everywhere
     * (exact against the CPU reference, for tests).
     */
    public enum Precision {
        FLOAT32,
        BF16
    }

    private final CudaRuntime rt;
    private final Precision precision;
    private final DenseKernels dense;
    private final AttentionKernels attention;
    private final Mamba2Kernels mamba2;
    private final Mamba2BatchKernels mamba2Batch;
    private final GdnKernels gdn;

    /** Opens CUDA device 0 in float32 precision; throws {@link IllegalStateException} saying why when there is none. */
    public CudaBackend() {
        this(Precision.FLOAT32);
    }

    /** Opens CUDA device 0; throws {@link IllegalStateException} saying why when there is none. */
    public CudaBackend(Precision precision) {
        this(new CudaRuntime(0), precision);
    }

    CudaBackend(CudaRuntime rt, Precision precision) {
        this.rt = rt;
        this.precision = precision;
        this.dense = new DenseKernels(rt, precision);
        this.attention = new AttentionKernels(rt);
        this.mamba2 = new Mamba2Kernels(rt);
        this.mamba2Batch = new Mamba2BatchKernels(rt);
        this.gdn = new GdnKernels(rt);
    }

    @Override
    public String name() {
        return "cuda";
    }

    public Precision precision() {
        return precision;
    }

    /** The runtime this backend launches on (for the package's timing tests). */
    CudaRuntime runtime() {
        return rt;
    }

    /** The device's name, as the driver reports it. */
    public String deviceName() {
        return rt.deviceName();
    }

    /** Bytes of device memory held by tensors that were not freed (weights, pools, temporaries). */
    public long liveBytes() {
        return rt.liveBytes();
    }

    /** Live device blocks: tensors not freed, plus the backend's own staging area. */
    public long liveBlocks() {
        return rt.liveBlocks();
    }

    @Override
    public void beginGraph() {
        rt.enter();
        rt.beginGraph();
    }

    @Override
    public void graphBreak() {
        rt.enter();
        rt.graphBreak();
    }

    @Override
    public void endGraph() {
        rt.enter();
        rt.endGraph();
    }

    /**
     * Whether recorded steps run as several graphs, cut at {@link #graphBreak()} (default: the system
     * property {@code hyspec.cuda.split-steps}, true); for benchmarks that compare the two.
     */
    public void splitSteps(boolean split) {
        rt.enter();
        rt.splitSteps(split);
    }

    public boolean splitsSteps() {
        return rt.splitsSteps();
    }

    /**
     * Graph batch sizes: 1, 2, 4, 8, then multiples of 8 (a step of R rows runs padded to the next
     * one, so steps of 33…40 rows share a graph).
     */
    @Override
    public int paddedBatchSize(int rows) {
        return rows <= 8 ? Integer.highestOneBit(Math.max(1, rows - 1)) << (rows <= 1 ? 0 : 1) : (rows + 7) / 8 * 8;
    }

    /** Graphs captured, steps replayed from a graph, recorded steps issued eagerly, recordings given up. */
    public long[] graphCounts() {
        return rt.graphCounts();
    }

    /** Waits for every issued kernel. */
    public void synchronize() {
        rt.enter();
        rt.sync();
    }

    static CudaTensor t(Tensor t) {
        if (t instanceof CudaTensor c) {
            return c;
        }
        throw new IllegalArgumentException("not a CUDA tensor: " + t);
    }

    static CudaTensor f32(Tensor t) {
        CudaTensor c = t(t);
        if (c.dtype() != DType.F32) {
            throw new IllegalArgumentException("expected a float32 tensor, got " + c);
        }
        return c;
    }

    // ---- memory ----

    private CudaTensor alloc(DType dtype, int[] shape) {
        long n = 1;
        for (int d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dimension");
            }
            n *= d;
        }
        long bytes = n * dtype.bytes();
        return new CudaTensor(rt.memory().alloc(bytes), dtype, shape);
    }

    @Override
    public Tensor zeros(int... shape) {
        rt.enter();
        CudaTensor t = alloc(DType.F32, shape);
        zero(t);
        return t;
    }

    @Override
    public Tensor upload(float[] data, int... shape) {
        rt.enter();
        CudaTensor t = alloc(DType.F32, shape);
        if (t.numel() != data.length) {
            free(t);
            throw new IllegalArgumentException("upload: " + data.length + " values for shape of " + t.numel());
        }
        if (data.length > 0) {
            rt.upload(Pointer.to(data), t.ptr(), (long) data.length * 4);
        }
        return t;
    }

    @Override
    public float[] download(Tensor tensor) {
        rt.enter();
        CudaTensor t = t(tensor);
        int n = Math.toIntExact(t.numel());
        float[] out = new float[n];
        if (n == 0) {
            return out;
        }
        if (t.dtype() == DType.F32) {
            rt.download(t.ptr(), Pointer.to(out), (long) n * 4);
            return out;
        }
        short[] raw = new short[n];
        rt.download(t.ptr(), Pointer.to(raw), (long) n * 2);
        for (int i = 0; i < n; i++) {
            out[i] = t.dtype() == DType.BF16 ? DType.bf16ToFloat(raw[i]) : DType.f16ToFloat(raw[i]);
        }
        return out;
    }

    @Override
    public Tensor weight(TensorEntry entry) {
        rt.enter();
        CudaTensor t = alloc(entry.dtype(), entry.shape());
        long bytes = entry.numElements() * entry.dtype().bytes();
        if (bytes > 0) {
            rt.upload(Pointer.to(direct(entry.bytes(), bytes)), t.ptr(), bytes);
        }
        return t;
    }

    @Override
    public Tensor weightRows(TensorEntry entry, int[] rows) {
        rt.enter();
        ByteBuffer bytes = entry.rows(rows);
        int[] shape = entry.shape().clone();
        shape[0] = rows.length;
        CudaTensor t = alloc(entry.dtype(), shape);
        if (bytes.remaining() > 0) {
            rt.upload(Pointer.to(direct(bytes, bytes.remaining())), t.ptr(), bytes.remaining());
        }
        return t;
    }

    @Override
    public Tensor randomWeight(long seed, float center, float scale, int... shape) {
        rt.enter();
        CudaTensor t = alloc(DType.BF16, shape);
        dense.randomUniform(t, seed, center, scale);
        return t;
    }

    /** A direct buffer of the first {@code bytes} bytes (mapped checkpoint buffers already are). */
    private static ByteBuffer direct(ByteBuffer b, long bytes) {
        ByteBuffer view = b.slice(0, Math.toIntExact(bytes));
        if (view.isDirect()) {
            return view;
        }
        ByteBuffer d = ByteBuffer.allocateDirect(view.remaining());
        d.put(view).flip();
        return d;
    }

    @Override
    public void free(Tensor tensor) {
        rt.enter();
        CudaTensor t = t(tensor);
        if (t.markFreed()) {
            rt.memory().release(t.ptrUnchecked());
        }
    }

    @Override
    public void copyRows(Tensor src, int srcRow, Tensor dst, int dstRow, int n) {
        rt.enter();
        CudaTensor s = f32(src);
        CudaTensor d = f32(dst);
        int cols = s.cols();
        if (d.cols() != cols) {
            throw new IllegalArgumentException("copyRows: " + src + " and " + dst + " differ in columns");
        }
        if (srcRow < 0 || dstRow < 0 || n < 0 || srcRow + n > s.rows() || dstRow + n > d.rows()) {
            throw new IndexOutOfBoundsException("copyRows: rows out of range");
        }
        if (n > 0) {
            rt.copy(d.at((long) dstRow * cols), s.at((long) srcRow * cols), (long) n * cols * 4);
        }
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        rt.enter();
        CudaTensor s = f32(src);
        CudaTensor d = f32(dst);
        if (s.numel() != d.numel()) {
            throw new IllegalArgumentException("copy: " + src + " to " + dst);
        }
        if (s.numel() > 0 && s != d) {
            rt.copy(d.ptr(), s.ptr(), s.numel() * 4);
        }
    }

    @Override
    public void zero(Tensor tensor) {
        rt.enter();
        CudaTensor t = t(tensor);
        long words = t.numel() * t.dtype().bytes() / 4;
        if (words > 0) {
            rt.zero(t.ptr(), words);
        }
    }

    // ---- dense math ----

    @Override
    public void embedding(int[] ids, Tensor table, Tensor out) {
        rt.enter();
        dense.embedding(ids, t(table), f32(out));
    }

    @Override
    public void matmul(Tensor x, Tensor w, Tensor bias, Tensor out) {
        rt.enter();
        dense.matmul(f32(x), t(w), bias == null ? null : t(bias), f32(out));
    }

    @Override
    public void rmsNorm(Tensor x, Tensor w, int groupSize, float eps, boolean plusOne, Tensor out) {
        rt.enter();
        dense.rmsNorm(f32(x), t(w), groupSize, eps, plusOne, f32(out));
    }

    @Override
    public void gatedRmsNorm(Tensor x, Tensor gate, Tensor w, int groupSize, float eps, boolean gateFirst, Tensor out) {
        rt.enter();
        dense.gatedRmsNorm(f32(x), f32(gate), t(w), groupSize, eps, gateFirst, f32(out));
    }

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        rt.enter();
        dense.add(f32(a), f32(b), f32(out));
    }

    @Override
    public void relu2(Tensor x, Tensor out) {
        rt.enter();
        dense.relu2(f32(x), f32(out));
    }

    @Override
    public void siluMul(Tensor gate, Tensor up, Tensor out) {
        rt.enter();
        dense.siluMul(f32(gate), f32(up), f32(out));
    }

    @Override
    public void sigmoidGate(Tensor x, Tensor gate, Tensor out) {
        rt.enter();
        dense.sigmoidGate(f32(x), f32(gate), f32(out));
    }

    @Override
    public void scaleRows(Tensor x, float[] scale, Tensor out) {
        rt.enter();
        dense.scaleRows(f32(x), scale, f32(out));
    }

    // ---- attention ----

    @Override
    public void rope(Tensor x, int heads, int headDim, int rotaryDim, float theta, int[] positions) {
        rt.enter();
        attention.rope(f32(x), heads, headDim, rotaryDim, theta, positions);
    }

    @Override
    public void writeKv(Tensor k, Tensor v, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int start) {
        rt.enter();
        attention.writeKv(f32(k), f32(v), f32(kPages), f32(vPages), blockTable, pageSize, start);
    }

    @Override
    public void pagedAttention(Tensor q, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int numHeads,
                               int numKvHeads, int headDim, int pastLen, Tensor out) {
        rt.enter();
        attention.pagedAttention(f32(q), f32(kPages), f32(vPages), blockTable, pageSize, numHeads, numKvHeads, headDim,
                pastLen, f32(out));
    }

    @Override
    public void writeKvBatch(Tensor k, Tensor v, Tensor kPages, Tensor vPages, int[][] blockTables, int pageSize,
                             int[] starts, int[] lengths, int tokensPerRow) {
        rt.enter();
        attention.writeKvBatch(f32(k), f32(v), f32(kPages), f32(vPages), blockTables, pageSize, starts, lengths,
                tokensPerRow);
    }

    @Override
    public void pagedAttentionBatch(Tensor q, Tensor kPages, Tensor vPages, int[][] blockTables, int pageSize,
                                    int numHeads, int numKvHeads, int headDim, int[] starts, int[] lengths,
                                    int tokensPerRow, Tensor out) {
        rt.enter();
        attention.pagedAttentionBatch(f32(q), f32(kPages), f32(vPages), blockTables, pageSize, numHeads, numKvHeads,
                headDim, starts, lengths, tokensPerRow, f32(out));
    }

    // ---- recurrent layers ----

    @Override
    public void causalConv1d(Tensor x, Tensor window, Tensor w, Tensor bias, Tensor out, boolean advance) {
        rt.enter();
        mamba2.causalConv1d(f32(x), f32(window), t(w), bias == null ? null : t(bias), f32(out), advance);
    }

    @Override
    public void shiftWindow(Tensor window, Tensor x, int count) {
        rt.enter();
        mamba2.shiftWindow(f32(window), f32(x), count);
    }

    @Override
    public void mamba2Scan(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias, Tensor aLog,
                           Tensor d, Mamba2Dims dims, Tensor y) {
        rt.enter();
        mamba2.scan(f32(state), layout, f32(xBC), f32(dtRaw), t(dtBias), t(aLog), t(d), dims, f32(y));
    }

    @Override
    public void mamba2ScanStates(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                 Tensor aLog, Tensor d, Mamba2Dims dims, Tensor[] states, Tensor y) {
        rt.enter();
        mamba2.scanStates(f32(state), layout, f32(xBC), f32(dtRaw), t(dtBias), t(aLog), t(d), dims, f32s(states), f32(y));
    }

    @Override
    public void mamba2Replay(Tensor state, StateLayout layout, Tensor history, int count, Mamba2Dims dims) {
        rt.enter();
        mamba2.replay(f32(state), layout, f32(history), count, dims);
    }

    @Override
    public void mamba2ReplayOutputs(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                    Tensor aLog, Tensor d, Mamba2Dims dims, Tensor history, Tensor y) {
        rt.enter();
        mamba2.replayOutputs(f32(state), layout, f32(xBC), f32(dtRaw), t(dtBias), t(aLog), t(d), dims, f32(history),
                f32(y));
    }

    @Override
    public void gatedDeltaScan(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                               Tensor dtBias, GdnDims dims, Tensor out) {
        rt.enter();
        gdn.scan(f32(state), layout, f32(qkv), f32(a), f32(b), t(aLog), t(dtBias), dims, f32(out));
    }

    @Override
    public void gatedDeltaScanStates(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                                     Tensor dtBias, GdnDims dims, Tensor[] states, Tensor out) {
        rt.enter();
        gdn.scanStates(f32(state), layout, f32(qkv), f32(a), f32(b), t(aLog), t(dtBias), dims, f32s(states), f32(out));
    }

    @Override
    public void gatedDeltaReplay(Tensor state, StateLayout layout, Tensor history, int count, GdnDims dims) {
        rt.enter();
        gdn.replay(f32(state), layout, f32(history), count, dims);
    }

    @Override
    public void gatedDeltaReplayOutputs(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                                        Tensor dtBias, GdnDims dims, Tensor history, Tensor out) {
        rt.enter();
        gdn.replayOutputs(f32(state), layout, f32(qkv), f32(a), f32(b), t(aLog), t(dtBias), dims, f32(history),
                f32(out));
    }

    @Override
    public void gatedDeltaScanBatch(Tensor[] states, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                                    Tensor dtBias, GdnDims dims, int tokensPerRow, Tensor out) {
        rt.enter();
        gdn.scanBatch(f32s(states), layout, f32(qkv), f32(a), f32(b), t(aLog), t(dtBias), dims, tokensPerRow, f32(out));
    }

    @Override
    public void gatedDeltaScanStatesBatch(Tensor[] states, StateLayout layout, Tensor qkv, Tensor a, Tensor b,
                                          Tensor aLog, Tensor dtBias, GdnDims dims, Tensor[][] scratch,
                                          int tokensPerRow, Tensor out) {
        rt.enter();
        CudaTensor[][] s = new CudaTensor[scratch.length][];
        for (int r = 0; r < scratch.length; r++) {
            s[r] = f32s(scratch[r]);
        }
        gdn.scanStatesBatch(f32s(states), layout, f32(qkv), f32(a), f32(b), t(aLog), t(dtBias), dims, s, tokensPerRow,
                f32(out));
    }

    @Override
    public void gatedDeltaReplayVerifyBatch(Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts,
                                            Tensor qkv, Tensor a, Tensor b, Tensor aLog, Tensor dtBias, GdnDims dims,
                                            Tensor[] next, int tokensPerRow, Tensor out) {
        rt.enter();
        gdn.replayVerifyBatch(f32s(states), layout, f32s(previous), counts, f32(qkv), f32(a), f32(b), t(aLog),
                t(dtBias), dims, f32s(next), tokensPerRow, f32(out));
    }

    /** The Gated DeltaNet kernels (for benchmarks and tests that fix the batched mapping). */
    GdnKernels gdnKernels() {
        return gdn;
    }

    @Override
    public void transposeState(Tensor state, int heads, int rows, int cols) {
        rt.enter();
        mamba2.transposeState(f32(state), heads, rows, cols);
    }

    // ---- batched generate rows ----

    @Override
    public void scatterRowBlocks(Tensor src, int tokensPerRow, Tensor[] dst) {
        rt.enter();
        dense.scatterRowBlocks(f32(src), tokensPerRow, f32s(dst));
    }

    @Override
    public void copyBatch(Tensor[] src, Tensor[] dst) {
        rt.enter();
        dense.copyBatch(f32s(src), f32s(dst));
    }

    @Override
    public void causalConv1dBatch(Tensor x, Tensor[] windows, Tensor w, Tensor bias, int tokensPerRow, Tensor out,
                                  boolean advance) {
        rt.enter();
        mamba2Batch.causalConv1dBatch(f32(x), f32s(windows), t(w), bias == null ? null : t(bias), tokensPerRow,
                f32(out), advance);
    }

    @Override
    public void convStepBatch(Tensor x, Tensor[] windows, Tensor[] previous, int[] counts, Tensor[] next, Tensor w,
                              Tensor bias, int tokensPerRow, Tensor out) {
        rt.enter();
        mamba2Batch.convStepBatch(f32(x), f32s(windows), f32s(previous), counts, f32s(next), t(w),
                bias == null ? null : t(bias), tokensPerRow, f32(out));
    }

    @Override
    public void shiftWindowBatch(Tensor[] windows, Tensor[] xs, int[] counts) {
        rt.enter();
        mamba2Batch.shiftWindowBatch(f32s(windows), f32s(xs), counts);
    }

    @Override
    public void mamba2ScanBatch(Tensor[] states, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                Tensor aLog, Tensor d, Mamba2Dims dims, int tokensPerRow, Tensor y) {
        rt.enter();
        mamba2Batch.scanBatch(f32s(states), layout, f32(xBC), f32(dtRaw), t(dtBias), t(aLog), t(d), dims, tokensPerRow,
                f32(y));
    }

    @Override
    public void mamba2ScanStatesBatch(Tensor[] states, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                      Tensor aLog, Tensor d, Mamba2Dims dims, Tensor[][] scratch, int tokensPerRow,
                                      Tensor y) {
        rt.enter();
        CudaTensor[][] s = new CudaTensor[scratch.length][];
        for (int r = 0; r < scratch.length; r++) {
            s[r] = f32s(scratch[r]);
        }
        mamba2Batch.scanStatesBatch(f32s(states), layout, f32(xBC), f32(dtRaw), t(dtBias), t(aLog), t(d), dims, s,
                tokensPerRow, f32(y));
    }

    /** One fused launch where the kernel applies (T ≤ 8, VK rows of at most 512), else the per-row operations. */
    @Override
    public void mamba2ReplayVerifyBatch(Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts,
                                        Tensor xBC, Tensor dtRaw, Tensor dtBias, Tensor aLog, Tensor d,
                                        Mamba2Dims dims, Tensor[] next, int tokensPerRow, Tensor y) {
        rt.enter();
        if (!mamba2Batch.canReplayVerify(layout, dims, tokensPerRow, states.length)) {
            Backend.super.mamba2ReplayVerifyBatch(states, layout, previous, counts, xBC, dtRaw, dtBias, aLog, d, dims,
                    next, tokensPerRow, y);
            return;
        }
        mamba2Batch.replayVerifyBatch(f32s(states), layout, f32s(previous), counts, f32(xBC), f32(dtRaw), t(dtBias), t(aLog),
                t(d), dims, f32s(next), tokensPerRow, f32(y));
    }

    // ---- fused decode-step ops ----

    @Override
    public Tensor empty(int... shape) {
        rt.enter();
        return alloc(DType.F32, shape);
    }

    @Override
    public void addRmsNorm(Tensor x, Tensor y, Tensor w, int groupSize, float eps, boolean plusOne, Tensor out) {
        rt.enter();
        dense.addRmsNorm(f32(x), f32(y), t(w), groupSize, eps, plusOne, f32(out));
    }

    @Override
    public void matmulRelu2(Tensor x, Tensor w, Tensor bias, Tensor out) {
        rt.enter();
        dense.matmulRelu2(f32(x), t(w), bias == null ? null : t(bias), f32(out));
    }

    @Override
    public void matmuls(Tensor x, Tensor[] w, Tensor[] bias, Tensor[] out) {
        rt.enter();
        CudaTensor[] ws = new CudaTensor[w.length];
        CudaTensor[] bs = new CudaTensor[w.length];
        for (int i = 0; i < w.length; i++) {
            ws[i] = t(w[i]);
            bs[i] = bias == null || bias[i] == null ? null : t(bias[i]);
        }
        dense.matmuls(f32(x), ws, bs, f32s(out));
    }

    // ---- mixture of experts ----

    @Override
    public void gatherRows(Tensor src, int[] rows, Tensor dst) {
        rt.enter();
        dense.gatherRows(f32(src), rows, f32(dst));
    }

    @Override
    public void scatterAddRows(Tensor src, int[] rows, float[] scale, Tensor dst) {
        rt.enter();
        dense.scatterAddRows(f32(src), rows, scale, f32(dst));
    }

    private static CudaTensor[] f32s(Tensor[] ts) {
        CudaTensor[] out = new CudaTensor[ts.length];
        for (int i = 0; i < ts.length; i++) {
            out[i] = f32(ts[i]);
        }
        return out;
    }

    @Override
    public void close() {
        rt.close();
    }

    // ---- sampling ----

    private SamplingKernels sampling;

    @Override
    public int[] argmax(Tensor logits) {
        rt.enter();
        return sampling().argmax(f32(logits));
    }

    @Override
    public int[] sample(Tensor logits, double[] temperature, int[] topK, double[] topP, double[] uniform) {
        rt.enter();
        return sampling().sample(f32(logits), temperature, topK, topP, uniform);
    }

    private SamplingKernels sampling() {
        if (sampling == null) {
            sampling = new SamplingKernels(rt);
        }
        return sampling;
    }

    // ---- mixture of experts without host round trips ----

    private MoeKernels moe;

    private MoeKernels moe() {
        if (moe == null) {
            moe = new MoeKernels(rt);
        }
        return moe;
    }

    /** With a persistent device table of the weights' addresses (freed when the backend closes). */
    @Override
    public ExpertWeights expertWeights(Tensor[] weights) {
        rt.enter();
        CudaTensor[] ws = new CudaTensor[weights.length];
        for (int e = 0; e < weights.length; e++) {
            ws[e] = t(weights[e]);
        }
        return moe().expertWeights(ws);
    }

    @Override
    public void moeRoute(Tensor logits, MoeRouting routing, Tensor ids, Tensor weights) {
        rt.enter();
        moe().route(f32(logits), routing, routing.scoreBias() == null ? null : f32(routing.scoreBias()), f32(ids),
                f32(weights));
    }

    /** One launch over every expert where the weights came from {@link #expertWeights}, else the per-expert default. */
    @Override
    public void moeExpertMatmul(Tensor x, Tensor ids, ExpertWeights experts, Tensor out) {
        rt.enter();
        if (!MoeKernels.hasTable(experts)) {
            Backend.super.moeExpertMatmul(x, ids, experts, out);
            return;
        }
        moe().expertMatmul(f32(x), f32(ids), experts, f32(out));
    }

    @Override
    public void moeCombine(Tensor y, Tensor ids, Tensor weights, Tensor out) {
        rt.enter();
        moe().combine(f32(y), f32(ids), f32(weights), f32(out));
    }

    // ---- benchmarks ----

    /** A timer of device time on the backend's stream (a pair of CUDA events), for benchmarks. */
    public EventTimer timer() {
        return new EventTimer(rt);
    }

    /**
     * Profiles every recorded step (decode and verify steps) from now until {@link #stopProfile()}:
     * each runs four times with its ops timed by event nodes ({@link StepProfile}), so outputs of the
     * profiled steps are not meaningful.
     */
    public StepProfile startProfile() {
        rt.enter();
        StepProfile profile = new StepProfile();
        rt.startProfile(profile);
        return profile;
    }

    /** Ends the profile that {@link #startProfile()} began. */
    public void stopProfile(StepProfile profile) {
        rt.enter();
        rt.stopProfile();
        profile.close();
    }

    /** Times the host's part of every step from now until {@link #stopHostProfile} ({@link HostProfile}). */
    public HostProfile startHostProfile() {
        rt.enter();
        HostProfile profile = new HostProfile();
        rt.hostProfile(profile);
        return profile;
    }

    /** Ends the host profile that {@link #startHostProfile()} began. */
    public void stopHostProfile() {
        rt.enter();
        rt.hostProfile(null);
    }

    /** The CUDA version the driver supports, as {@code "12.4"}. */
    public String driverVersion() {
        rt.enter();
        int[] v = new int[1];
        jcuda.driver.JCudaDriver.cuDriverGetVersion(v);
        return v[0] / 1000 + "." + v[0] % 1000 / 10;
    }
}
