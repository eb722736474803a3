package dev.hyspec.backend.cpu;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.TensorEntry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.stream.IntStream;

/**
 * The pure-Java reference backend: float32 on the heap, weights read in place from the mapped
 * checkpoint. Large matmuls split their output rows over the common fork-join pool; the inner
 * loops use the Vector API when it is available ({@link FastMath}).
 */
public final class CpuBackend implements Backend {
    /** Below this many multiply-adds a matmul runs on the calling thread. */
    private static final long PARALLEL_WORK = 1L << 16;
    private static final ThreadLocal<float[]> ROW = ThreadLocal.withInitial(() -> new float[0]);

    @Override
    public String name() {
        return "cpu";
    }

    // ---- memory ----

    @Override
    public Tensor zeros(int... shape) {
        long n = 1;
        for (int d : shape) {
            n *= d;
        }
        return new CpuTensor(new float[Math.toIntExact(n)], shape);
    }

    @Override
    public Tensor upload(float[] data, int... shape) {
        return new CpuTensor(data.clone(), shape);
    }

    @Override
    public float[] download(Tensor t) {
        return f(t).clone();
    }

    @Override
    public Tensor weight(TensorEntry entry) {
        return new CpuWeight(entry.bytes(), entry.dtype(), entry.shape());
    }

    @Override
    public Tensor weightRows(TensorEntry entry, int[] rows) {
        int[] shape = entry.shape();
        long rowBytes = entry.numElements() / shape[0] * entry.dtype().bytes();
        ByteBuffer src = entry.bytes();
        int[] newShape = shape.clone();
        newShape[0] = rows.length;
        if (consecutive(rows) && rows.length > 0 && rows[0] >= 0 && rows[rows.length - 1] < shape[0]) {
            // A contiguous block of rows stays a view of the mapped file.
            return new CpuWeight(src.slice((int) (rows[0] * rowBytes), (int) (rows.length * rowBytes)),
                    entry.dtype(), newShape);
        }
        ByteBuffer dst = ByteBuffer.allocateDirect(Math.toIntExact(rowBytes * rows.length)).order(ByteOrder.LITTLE_ENDIAN);
        for (int r : rows) {
            if (r < 0 || r >= shape[0]) {
                throw new IndexOutOfBoundsException("row " + r + " of " + entry);
            }
            dst.put(src.slice((int) (r * rowBytes), (int) rowBytes));
        }
        return new CpuWeight(dst.flip(), entry.dtype(), newShape);
    }

    private static boolean consecutive(int[] rows) {
        for (int i = 1; i < rows.length; i++) {
            if (rows[i] != rows[i - 1] + 1) {
                return false;
            }
        }
        return true;
    }

    @Override
    public void free(Tensor t) {
        // Heap memory: the garbage collector reclaims it once unreferenced.
    }

    @Override
    public void copyRows(Tensor src, int srcRow, Tensor dst, int dstRow, int n) {
        int cols = src.cols();
        if (dst.cols() != cols) {
            throw new IllegalArgumentException("copyRows: " + src + " and " + dst + " differ in columns");
        }
        System.arraycopy(f(src), srcRow * cols, f(dst), dstRow * cols, n * cols);
    }

    // ---- dense math ----

    @Override
    public void embedding(int[] ids, Tensor table, Tensor out) {
        int d = table.cols();
        float[] o = f(out);
        for (int t = 0; t < ids.length; t++) {
            if (ids[t] < 0 || ids[t] >= table.rows()) {
                throw new IllegalArgumentException("token id " + ids[t] + " is outside the vocabulary [0, "
                        + table.rows() + ")");
            }
            if (table instanceof CpuWeight w) {
                float[] row = row(d);
                w.readRow(ids[t], row);
                System.arraycopy(row, 0, o, t * d, d);
            } else {
                System.arraycopy(f(table), ids[t] * d, o, t * d, d);
            }
        }
    }

    @Override
    public void matmul(Tensor x, Tensor w, Tensor bias, Tensor out) {
        int n = x.rows();
        int in = x.cols();
        int outDim = w.rows();
        if (w.cols() != in || out.rows() != n || out.cols() != outDim) {
            throw new IllegalArgumentException("matmul shapes: x " + Arrays.toString(x.shape()) + ", w "
                    + Arrays.toString(w.shape()) + ", out " + Arrays.toString(out.shape()));
        }
        float[] xs = f(x);
        float[] os = f(out);
        float[] b = bias == null ? null : f(bias);
        long work = (long) n * in * outDim;
        int chunks = work < PARALLEL_WORK ? 1 : Math.min(outDim, 4 * Runtime.getRuntime().availableProcessors());
        IntStream range = IntStream.range(0, chunks);
        (chunks > 1 ? range.parallel() : range).forEach(c -> {
            int lo = (int) ((long) outDim * c / chunks);
            int hi = (int) ((long) outDim * (c + 1) / chunks);
            for (int o = lo; o < hi; o++) {
                float[] wr;
                int wOff;
                if (w instanceof CpuWeight cw) {
                    wr = row(in);
                    cw.readRow(o, wr);
                    wOff = 0;
                } else {
                    wr = f(w);
                    wOff = o * in;
                }
                float bo = b == null ? 0f : b[o];
                for (int t = 0; t < n; t++) {
                    os[t * outDim + o] = FastMath.dot(xs, t * in, wr, wOff, in) + bo;
                }
            }
        });
    }

    @Override
    public void rmsNorm(Tensor x, Tensor w, int groupSize, float eps, boolean plusOne, Tensor out) {
        float[] xs = f(x);
        float[] ws = f(w);
        float[] os = f(out);
        int cols = x.cols();
        for (int base = 0; base < xs.length; base += groupSize) {
            float inv = invRms(xs, base, groupSize, eps);
            int col0 = base % cols;
            for (int i = 0; i < groupSize; i++) {
                float wi = ws[(col0 + i) % ws.length];
                os[base + i] = xs[base + i] * inv * (plusOne ? 1f + wi : wi);
            }
        }
    }

    @Override
    public void gatedRmsNorm(Tensor x, Tensor gate, Tensor w, int groupSize, float eps, boolean gateFirst,
                             Tensor out) {
        float[] xs = f(x);
        float[] gs = f(gate);
        float[] ws = f(w);
        float[] os = f(out);
        int cols = x.cols();
        float[] u = new float[groupSize];
        for (int base = 0; base < xs.length; base += groupSize) {
            for (int i = 0; i < groupSize; i++) {
                u[i] = gateFirst ? xs[base + i] * FastMath.silu(gs[base + i]) : xs[base + i];
            }
            float inv = invRms(u, 0, groupSize, eps);
            int col0 = base % cols;
            for (int i = 0; i < groupSize; i++) {
                float v = u[i] * inv * ws[(col0 + i) % ws.length];
                os[base + i] = gateFirst ? v : v * FastMath.silu(gs[base + i]);
            }
        }
    }

    private static float invRms(float[] a, int off, int n, float eps) {
        float ss = FastMath.dot(a, off, a, off, n);
        return (float) (1.0 / Math.sqrt(ss / n + eps));
    }

    @Override
    public void add(Tensor a, Tensor b, Tensor out) {
        float[] as = f(a);
        float[] bs = f(b);
        float[] os = f(out);
        for (int i = 0; i < os.length; i++) {
            os[i] = as[i] + bs[i];
        }
    }

    @Override
    public void relu2(Tensor x, Tensor out) {
        float[] xs = f(x);
        float[] os = f(out);
        for (int i = 0; i < os.length; i++) {
            float r = Math.max(xs[i], 0f);
            os[i] = r * r;
        }
    }

    @Override
    public void siluMul(Tensor gate, Tensor up, Tensor out) {
        float[] gs = f(gate);
        float[] us = f(up);
        float[] os = f(out);
        for (int i = 0; i < os.length; i++) {
            os[i] = FastMath.silu(gs[i]) * us[i];
        }
    }

    @Override
    public void sigmoidGate(Tensor x, Tensor gate, Tensor out) {
        float[] xs = f(x);
        float[] gs = f(gate);
        float[] os = f(out);
        int cols = x.cols();
        boolean perRow = gate.cols() == 1 && cols != 1;
        for (int i = 0; i < os.length; i++) {
            os[i] = xs[i] * FastMath.sigmoid(gs[perRow ? i / cols : i]);
        }
    }

    @Override
    public void scaleRows(Tensor x, float[] scale, Tensor out) {
        float[] xs = f(x);
        float[] os = f(out);
        int cols = x.cols();
        for (int i = 0; i < os.length; i++) {
            os[i] = xs[i] * scale[i / cols];
        }
    }

    // ---- attention ----

    @Override
    public void rope(Tensor x, int heads, int headDim, int rotaryDim, float theta, int[] positions) {
        float[] xs = f(x);
        int half = rotaryDim / 2;
        float[] invFreq = new float[half];
        for (int i = 0; i < half; i++) {
            invFreq[i] = (float) (1.0 / Math.pow(theta, (2.0 * i) / rotaryDim));
        }
        for (int t = 0; t < positions.length; t++) {
            for (int i = 0; i < half; i++) {
                float angle = positions[t] * invFreq[i];
                float cos = (float) Math.cos(angle);
                float sin = (float) Math.sin(angle);
                for (int h = 0; h < heads; h++) {
                    int base = (t * heads + h) * headDim;
                    float x1 = xs[base + i];
                    float x2 = xs[base + i + half];
                    xs[base + i] = x1 * cos - x2 * sin;
                    xs[base + i + half] = x2 * cos + x1 * sin;
                }
            }
        }
    }

    @Override
    public void attention(Tensor q, Tensor kCache, Tensor vCache, int numHeads, int numKvHeads, int headDim,
                          int pastLen, Tensor out) {
        float[] qs = f(q);
        float[] ks = f(kCache);
        float[] vs = f(vCache);
        float[] os = f(out);
        int tokens = q.rows();
        int kvStride = numKvHeads * headDim;
        int group = numHeads / numKvHeads;
        float scale = (float) (1.0 / Math.sqrt(headDim));
        float[] scores = new float[pastLen + tokens];
        Arrays.fill(os, 0f);
        for (int t = 0; t < tokens; t++) {
            int visible = pastLen + t + 1;
            for (int h = 0; h < numHeads; h++) {
                int qOff = (t * numHeads + h) * headDim;
                int kvOff = (h / group) * headDim;
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < visible; j++) {
                    scores[j] = FastMath.dot(qs, qOff, ks, j * kvStride + kvOff, headDim) * scale;
                    max = Math.max(max, scores[j]);
                }
                float sum = 0f;
                for (int j = 0; j < visible; j++) {
                    scores[j] = (float) Math.exp(scores[j] - max);
                    sum += scores[j];
                }
                for (int j = 0; j < visible; j++) {
                    FastMath.axpy(scores[j] / sum, vs, j * kvStride + kvOff, os, qOff, headDim);
                }
            }
        }
    }

    // ---- recurrent layers ----

    @Override
    public void causalConv1d(Tensor x, Tensor window, Tensor w, Tensor bias, Tensor out, boolean advance) {
        float[] xs = f(x);
        float[] win = f(window);
        float[] ws = f(w);
        float[] b = bias == null ? null : f(bias);
        float[] os = f(out);
        int tokens = x.rows();
        int channels = x.cols();
        int width = ws.length / channels;
        int keep = width - 1;
        float[] u = new float[keep + tokens];
        for (int c = 0; c < channels; c++) {
            System.arraycopy(win, c * keep, u, 0, keep);
            for (int t = 0; t < tokens; t++) {
                u[keep + t] = xs[t * channels + c];
            }
            for (int t = 0; t < tokens; t++) {
                float acc = b == null ? 0f : b[c];
                for (int j = 0; j < width; j++) {
                    acc += ws[c * width + j] * u[t + j];
                }
                os[t * channels + c] = FastMath.silu(acc);
            }
            if (advance) {
                System.arraycopy(u, tokens, win, c * keep, keep);
            }
        }
    }

    @Override
    public void mamba2Scan(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias, Tensor aLog, Tensor d,
                           Mamba2Dims dims, Tensor y) {
        float[] s = f(state);
        float[] in = f(xBC);
        float[] dtr = f(dtRaw);
        float[] dtb = f(dtBias);
        float[] al = f(aLog);
        float[] dd = f(d);
        float[] ys = f(y);
        int heads = dims.numHeads();
        int p = dims.headDim();
        int n = dims.stateSize();
        int headsPerGroup = heads / dims.nGroups();
        int conv = dims.convDim();
        int bOff = dims.innerSize();
        int cOff = bOff + dims.nGroups() * n;
        for (int t = 0; t < xBC.rows(); t++) {
            int row = t * conv;
            for (int h = 0; h < heads; h++) {
                float dt = FastMath.softplus(dtr[t * heads + h] + dtb[h]);
                dt = Math.min(Math.max(dt, dims.dtMin()), dims.dtMax());
                float decay = (float) Math.exp(dt * -(float) Math.exp(al[h]));
                int g = h / headsPerGroup;
                int bIdx = row + bOff + g * n;
                int cIdx = row + cOff + g * n;
                for (int i = 0; i < p; i++) {
                    float xi = in[row + h * p + i];
                    int sOff = (h * p + i) * n;
                    for (int k = 0; k < n; k++) {
                        s[sOff + k] *= decay;
                    }
                    FastMath.axpy(dt * xi, in, bIdx, s, sOff, n);
                    ys[t * heads * p + h * p + i] = FastMath.dot(s, sOff, in, cIdx, n) + dd[h] * xi;
                }
            }
        }
    }

    @Override
    public void gatedDeltaScan(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog, Tensor dtBias,
                               GdnDims dims, Tensor out) {
        float[] s = f(state);
        float[] in = f(qkv);
        float[] as = f(a);
        float[] bs = f(b);
        float[] al = f(aLog);
        float[] dtb = f(dtBias);
        float[] os = f(out);
        int hv = dims.numValueHeads();
        int dk = dims.keyHeadDim();
        int dv = dims.valueHeadDim();
        int perKeyHead = hv / dims.numKeyHeads();
        int conv = dims.convDim();
        float qScale = (float) (1.0 / Math.sqrt(dk));
        float[] q = new float[dk];
        float[] k = new float[dk];
        float[] delta = new float[dv];
        for (int t = 0; t < qkv.rows(); t++) {
            int row = t * conv;
            for (int h = 0; h < hv; h++) {
                int kh = h / perKeyHead;
                l2normalize(in, row + kh * dk, q, dk, qScale);
                l2normalize(in, row + dims.keyDim() + kh * dk, k, dk, 1f);
                int vOff = row + 2 * dims.keyDim() + h * dv;
                float beta = FastMath.sigmoid(bs[t * hv + h]);
                float g = -(float) Math.exp(al[h]) * FastMath.softplus(as[t * hv + h] + dtb[h]);
                float decay = (float) Math.exp(g);
                int sOff = h * dk * dv;
                // S ← S·e^g ;  δ = β (v − Sᵀk)
                for (int i = 0; i < dk * dv; i++) {
                    s[sOff + i] *= decay;
                }
                Arrays.fill(delta, 0f);
                for (int i = 0; i < dk; i++) {
                    FastMath.axpy(k[i], s, sOff + i * dv, delta, 0, dv);
                }
                for (int j = 0; j < dv; j++) {
                    delta[j] = (in[vOff + j] - delta[j]) * beta;
                }
                // S ← S + k δᵀ ;  o = Sᵀq
                int oOff = (t * hv + h) * dv;
                Arrays.fill(os, oOff, oOff + dv, 0f);
                for (int i = 0; i < dk; i++) {
                    FastMath.axpy(k[i], delta, 0, s, sOff + i * dv, dv);
                    FastMath.axpy(q[i], s, sOff + i * dv, os, oOff, dv);
                }
            }
        }
    }

    /** {@code dst = scale · x / sqrt(Σx² + 1e−6)} (the FLA / HF {@code l2norm}). */
    private static void l2normalize(float[] src, int off, float[] dst, int n, float scale) {
        float inv = (float) (1.0 / Math.sqrt(FastMath.dot(src, off, src, off, n) + 1e-6)) * scale;
        for (int i = 0; i < n; i++) {
            dst[i] = src[off + i] * inv;
        }
    }

    // ---- mixture of experts ----

    @Override
    public void gatherRows(Tensor src, int[] rows, Tensor dst) {
        int cols = src.cols();
        float[] s = f(src);
        float[] d = f(dst);
        for (int i = 0; i < rows.length; i++) {
            System.arraycopy(s, rows[i] * cols, d, i * cols, cols);
        }
    }

    @Override
    public void scatterAddRows(Tensor src, int[] rows, float[] scale, Tensor dst) {
        int cols = src.cols();
        float[] s = f(src);
        float[] d = f(dst);
        for (int i = 0; i < rows.length; i++) {
            FastMath.axpy(scale[i], s, i * cols, d, rows[i] * cols, cols);
        }
    }

    // ---- not yet implemented (stubs) ----

    @Override
    public void writeKv(Tensor k, Tensor v, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int start) {
        throw new UnsupportedOperationException("writeKv");
    }

    @Override
    public void pagedAttention(Tensor q, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int numHeads,
                               int numKvHeads, int headDim, int pastLen, Tensor out) {
        throw new UnsupportedOperationException("pagedAttention");
    }

    @Override
    public void shiftWindow(Tensor window, Tensor x, int count) {
        throw new UnsupportedOperationException("shiftWindow");
    }

    @Override
    public void mamba2ScanStates(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                 Tensor aLog, Tensor d, Mamba2Dims dims, Tensor[] states, Tensor y) {
        throw new UnsupportedOperationException("mamba2ScanStates");
    }

    @Override
    public void mamba2Replay(Tensor state, StateLayout layout, Tensor history, int count, Mamba2Dims dims) {
        throw new UnsupportedOperationException("mamba2Replay");
    }

    @Override
    public void mamba2ReplayOutputs(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                    Tensor aLog, Tensor d, Mamba2Dims dims, Tensor history, Tensor y) {
        throw new UnsupportedOperationException("mamba2ReplayOutputs");
    }

    @Override
    public void gatedDeltaScanStates(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                                     Tensor dtBias, GdnDims dims, Tensor[] states, Tensor out) {
        throw new UnsupportedOperationException("gatedDeltaScanStates");
    }

    @Override
    public void gatedDeltaReplay(Tensor state, StateLayout layout, Tensor history, int count, GdnDims dims) {
        throw new UnsupportedOperationException("gatedDeltaReplay");
    }

    @Override
    public void gatedDeltaReplayOutputs(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b,
                                        Tensor aLog, Tensor dtBias, GdnDims dims, Tensor history, Tensor out) {
        throw new UnsupportedOperationException("gatedDeltaReplayOutputs");
    }

    @Override
    public void transposeState(Tensor state, int heads, int rows, int cols) {
        throw new UnsupportedOperationException("transposeState");
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        System.arraycopy(f(src), 0, f(dst), 0, Math.toIntExact(src.numel()));
    }

    @Override
    public void zero(Tensor t) {
        Arrays.fill(f(t), 0f);
    }

    @Override
    public void close() {
        // Nothing held outside the heap but mapped weights, which the checkpoint owns.
    }

    private static float[] f(Tensor t) {
        if (t instanceof CpuTensor c) {
            return c.data;
        }
        if (t instanceof CpuWeight w) {
            throw new IllegalArgumentException("weight " + w + " used where a float32 tensor is needed");
        }
        throw new IllegalArgumentException("not a CPU tensor: " + t);
    }

    private static float[] row(int n) {
        float[] r = ROW.get();
        if (r.length < n) {
            r = new float[n];
            ROW.set(r);
        }
        return r;
    }
}
