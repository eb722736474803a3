package dev.hyspec.backend.cpu;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.SamplingRows;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.TensorEntry;
import dev.hyspec.sampling.Sampler;
import dev.hyspec.sampling.SamplingParams;
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
    private static final Sampler SAMPLER = new Sampler();
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
        if (t instanceof CpuWeight w) {   // widened, as the GPU backend downloads a weight
            float[] out = new float[Math.toIntExact(w.numel())];
            float[] row = new float[w.cols];
            for (int r = 0; r < w.rows; r++) {
                w.readRow(r, row);
                System.arraycopy(row, 0, out, r * w.cols, w.cols);
            }
            return out;
        }
        return f(t).clone();
    }

    @Override
    public Tensor weight(TensorEntry entry) {
        return new CpuWeight(entry.bytes(), entry.dtype(), entry.shape());
    }

    @Override
    public Tensor weightRows(TensorEntry entry, int[] rows) {
        int[] shape = entry.shape().clone();
        shape[0] = rows.length;
        // consecutive rows stay a view of the mapped file
        return new CpuWeight(entry.rows(rows), entry.dtype(), shape);
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
    public void writeKv(Tensor k, Tensor v, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int start) {
        int width = k.cols();
        if (v.cols() != width || kPages.cols() != width || vPages.cols() != width || v.rows() != k.rows()) {
            throw new IllegalArgumentException("writeKv shapes: k " + Arrays.toString(k.shape()) + ", v "
                    + Arrays.toString(v.shape()) + ", kPages " + Arrays.toString(kPages.shape()) + ", vPages "
                    + Arrays.toString(vPages.shape()));
        }
        float[] ks = f(k);
        float[] vs = f(v);
        float[] kp = f(kPages);
        float[] vp = f(vPages);
        for (int t = 0; t < k.rows(); t++) {
            int dst = pageRow(blockTable, pageSize, start + t) * width;
            System.arraycopy(ks, t * width, kp, dst, width);
            System.arraycopy(vs, t * width, vp, dst, width);
        }
    }

    @Override
    public void pagedAttention(Tensor q, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int numHeads,
                               int numKvHeads, int headDim, int pastLen, Tensor out) {
        float[] qs = f(q);
        float[] ks = f(kPages);
        float[] vs = f(vPages);
        float[] os = f(out);
        int tokens = q.rows();
        int kvStride = numKvHeads * headDim;
        if (kPages.cols() != kvStride || vPages.cols() != kvStride) {
            throw new IllegalArgumentException("pagedAttention: pages " + Arrays.toString(kPages.shape()) + " / "
                    + Arrays.toString(vPages.shape()) + " are not [rows, " + kvStride + "]");
        }
        int group = numHeads / numKvHeads;
        float scale = (float) (1.0 / Math.sqrt(headDim));
        int total = pastLen + tokens;
        // Offset of each position's row in the pages, resolved once for all heads.
        int[] rowOff = new int[total];
        for (int j = 0; j < total; j++) {
            rowOff[j] = pageRow(blockTable, pageSize, j) * kvStride;
        }
        float[] scores = new float[total];
        Arrays.fill(os, 0f);
        for (int t = 0; t < tokens; t++) {
            int visible = pastLen + t + 1;
            for (int h = 0; h < numHeads; h++) {
                int qOff = (t * numHeads + h) * headDim;
                int kvOff = (h / group) * headDim;
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j < visible; j++) {
                    scores[j] = FastMath.dot(qs, qOff, ks, rowOff[j] + kvOff, headDim) * scale;
                    max = Math.max(max, scores[j]);
                }
                float sum = 0f;
                for (int j = 0; j < visible; j++) {
                    scores[j] = (float) Math.exp(scores[j] - max);
                    sum += scores[j];
                }
                for (int j = 0; j < visible; j++) {
                    FastMath.axpy(scores[j] / sum, vs, rowOff[j] + kvOff, os, qOff, headDim);
                }
            }
        }
    }

    /** The row of a paged cache that holds position {@code p}. */
    private static int pageRow(int[] blockTable, int pageSize, int p) {
        int page = p / pageSize;
        if (p < 0 || page >= blockTable.length) {
            throw new IndexOutOfBoundsException("position " + p + " is outside a block table of " + blockTable.length
                    + " pages of " + pageSize);
        }
        return blockTable[page] * pageSize + p % pageSize;
    }

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
    public void shiftWindow(Tensor window, Tensor x, int count) {
        float[] win = f(window);
        float[] xs = f(x);
        int channels = window.rows();
        int keep = window.cols();
        if (x.cols() != channels || count < 0 || count > x.rows()) {
            throw new IllegalArgumentException("shiftWindow: window " + Arrays.toString(window.shape()) + ", x "
                    + Arrays.toString(x.shape()) + ", count " + count);
        }
        if (count == 0 || keep == 0) {
            return;
        }
        // The window keeps its last keep − count columns (none when count ≥ keep), then takes the
        // last min(count, keep) rows of x.
        int fromWindow = Math.max(keep - count, 0);
        for (int c = 0; c < channels; c++) {
            int w0 = c * keep;
            System.arraycopy(win, w0 + keep - fromWindow, win, w0, fromWindow);
            for (int i = fromWindow; i < keep; i++) {
                win[w0 + i] = xs[(count - keep + i) * channels + c];
            }
        }
    }

    // Mamba2. Per head the state is [P, N] (VK, N contiguous) or [N, P] (KV, P contiguous); both
    // layouts run along their contiguous dimension with FastMath.

    @Override
    public void mamba2Scan(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias, Tensor aLog,
                           Tensor d, Mamba2Dims dims, Tensor y) {
        checkState(state, dims.numHeads() * dims.headDim() * dims.stateSize());
        mamba2Run(f(state), layout, xBC, dtRaw, dtBias, aLog, d, dims, null, y);
    }

    @Override
    public void mamba2ScanStates(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                 Tensor aLog, Tensor d, Mamba2Dims dims, Tensor[] states, Tensor y) {
        checkState(state, dims.numHeads() * dims.headDim() * dims.stateSize());
        checkStates(states, xBC.rows(), state);
        mamba2Run(f(state).clone(), layout, xBC, dtRaw, dtBias, aLog, d, dims, states, y);
    }

    /** The Mamba2 recurrence on {@code s}, copying it to {@code states[t]} after each token when not null. */
    private static void mamba2Run(float[] s, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                  Tensor aLog, Tensor d, Mamba2Dims dims, Tensor[] states, Tensor y) {
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
                float dt = mamba2Dt(dtr[t * heads + h], dtb[h], dims);
                float decay = (float) Math.exp(dt * mamba2A(al[h]));
                int g = h / headsPerGroup;
                int xIdx = row + h * p;
                int bIdx = row + bOff + g * n;
                int cIdx = row + cOff + g * n;
                int sOff = h * p * n;
                int yOff = (t * heads + h) * p;
                if (layout == StateLayout.VK) {
                    for (int i = 0; i < p; i++) {
                        float xi = in[xIdx + i];
                        int rOff = sOff + i * n;
                        scale(s, rOff, n, decay);
                        FastMath.axpy(dt * xi, in, bIdx, s, rOff, n);
                        ys[yOff + i] = FastMath.dot(s, rOff, in, cIdx, n) + dd[h] * xi;
                    }
                } else {
                    for (int k = 0; k < n; k++) {
                        int rOff = sOff + k * p;
                        scale(s, rOff, p, decay);
                        FastMath.axpy(dt * in[bIdx + k], in, xIdx, s, rOff, p);
                    }
                    for (int i = 0; i < p; i++) {
                        ys[yOff + i] = dd[h] * in[xIdx + i];
                    }
                    for (int k = 0; k < n; k++) {
                        FastMath.axpy(in[cIdx + k], s, sOff + k * p, ys, yOff, p);
                    }
                }
            }
            if (states != null) {
                System.arraycopy(s, 0, f(states[t]), 0, s.length);
            }
        }
    }

    @Override
    public void mamba2Replay(Tensor state, StateLayout layout, Tensor history, int count, Mamba2Dims dims) {
        float[] s = f(state);
        float[] hs = f(history);
        int heads = dims.numHeads();
        int p = dims.headDim();
        int n = dims.stateSize();
        checkState(state, heads * p * n);
        int width = mamba2HistoryWidth(dims);
        checkHistory(history, width, count);
        if (count == 0) {
            return;
        }
        int headsPerGroup = heads / dims.nGroups();
        int hB = dims.innerSize();
        int hDt = hB + dims.nGroups() * n;
        int hC = hDt + heads;
        int last = (count - 1) * width;
        for (int h = 0; h < heads; h++) {
            float cLast = hs[last + hC + h];
            int sOff = h * p * n;
            int g = h / headsPerGroup;
            scale(s, sOff, p * n, (float) Math.exp(cLast));
            for (int j = 0; j < count; j++) {
                int jr = j * width;
                float w = (float) Math.exp(cLast - hs[jr + hC + h]) * hs[jr + hDt + h];
                int xIdx = jr + h * p;
                int bIdx = jr + hB + g * n;
                if (layout == StateLayout.VK) {
                    for (int i = 0; i < p; i++) {
                        FastMath.axpy(w * hs[xIdx + i], hs, bIdx, s, sOff + i * n, n);
                    }
                } else {
                    for (int k = 0; k < n; k++) {
                        FastMath.axpy(w * hs[bIdx + k], hs, xIdx, s, sOff + k * p, p);
                    }
                }
            }
        }
    }

    @Override
    public void mamba2ReplayOutputs(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                    Tensor aLog, Tensor d, Mamba2Dims dims, Tensor history, Tensor y) {
        float[] s = f(state);
        float[] in = f(xBC);
        float[] dtr = f(dtRaw);
        float[] dtb = f(dtBias);
        float[] al = f(aLog);
        float[] dd = f(d);
        float[] hs = f(history);
        float[] ys = f(y);
        int tokens = xBC.rows();
        int heads = dims.numHeads();
        int p = dims.headDim();
        int n = dims.stateSize();
        checkState(state, heads * p * n);
        int width = mamba2HistoryWidth(dims);
        checkHistory(history, width, tokens);
        int headsPerGroup = heads / dims.nGroups();
        int conv = dims.convDim();
        int cOff = dims.innerSize() + dims.nGroups() * n;
        int hB = dims.innerSize();
        int hDt = hB + dims.nGroups() * n;
        int hC = hDt + heads;
        // History rows: x | B straight from xBC (they are its first H·P + G·N columns), dt, and the
        // running sum c of A·dt from the start of this call.
        float[] c = new float[heads];
        for (int t = 0; t < tokens; t++) {
            int hr = t * width;
            System.arraycopy(in, t * conv, hs, hr, hDt);
            for (int h = 0; h < heads; h++) {
                float dt = mamba2Dt(dtr[t * heads + h], dtb[h], dims);
                c[h] += mamba2A(al[h]) * dt;
                hs[hr + hDt + h] = dt;
                hs[hr + hC + h] = c[h];
            }
        }
        // y_t = e^{c_t}·(C_t·S) + Σ_{j≤t} (C_t·B_j)·e^{c_t−c_j}·dt_j·x_j + D·x_t, from the history rows.
        for (int t = 0; t < tokens; t++) {
            int row = t * conv;
            int hr = t * width;
            for (int h = 0; h < heads; h++) {
                int g = h / headsPerGroup;
                int cIdx = row + cOff + g * n;
                int sOff = h * p * n;
                int yOff = (t * heads + h) * p;
                float ct = hs[hr + hC + h];
                float carry = (float) Math.exp(ct);
                if (layout == StateLayout.VK) {
                    for (int i = 0; i < p; i++) {
                        ys[yOff + i] = carry * FastMath.dot(s, sOff + i * n, in, cIdx, n);
                    }
                } else {
                    Arrays.fill(ys, yOff, yOff + p, 0f);
                    for (int k = 0; k < n; k++) {
                        FastMath.axpy(in[cIdx + k], s, sOff + k * p, ys, yOff, p);
                    }
                    scale(ys, yOff, p, carry);
                }
                for (int j = 0; j <= t; j++) {
                    int jr = j * width;
                    float cb = FastMath.dot(in, cIdx, hs, jr + hB + g * n, n);
                    float w = cb * (float) Math.exp(ct - hs[jr + hC + h]) * hs[jr + hDt + h];
                    FastMath.axpy(w, hs, jr + h * p, ys, yOff, p);
                }
                FastMath.axpy(dd[h], in, row + h * p, ys, yOff, p);
            }
        }
    }

    /** {@code dt = clamp(softplus(dtRaw + dtBias), dtMin, dtMax)}. */
    private static float mamba2Dt(float raw, float bias, Mamba2Dims dims) {
        float dt = FastMath.softplus(raw + bias);
        return Math.min(Math.max(dt, dims.dtMin()), dims.dtMax());
    }

    /** {@code A = −exp(aLog)}. */
    private static float mamba2A(float aLog) {
        return -(float) Math.exp(aLog);
    }

    private static int mamba2HistoryWidth(Mamba2Dims dims) {
        return dims.innerSize() + dims.nGroups() * dims.stateSize() + 2 * dims.numHeads();
    }

    // Gated DeltaNet. Per head the state is [Dk, Dv] (KV, Dv contiguous) or [Dv, Dk] (VK, Dk contiguous).

    @Override
    public void gatedDeltaScan(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                               Tensor dtBias, GdnDims dims, Tensor out) {
        checkState(state, dims.numValueHeads() * dims.keyHeadDim() * dims.valueHeadDim());
        gdnRun(f(state), layout, qkv, a, b, aLog, dtBias, dims, null, null, out);
    }

    @Override
    public void gatedDeltaScanStates(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                                     Tensor dtBias, GdnDims dims, Tensor[] states, Tensor out) {
        checkState(state, dims.numValueHeads() * dims.keyHeadDim() * dims.valueHeadDim());
        checkStates(states, qkv.rows(), state);
        gdnRun(f(state).clone(), layout, qkv, a, b, aLog, dtBias, dims, states, null, out);
    }

    @Override
    public void gatedDeltaReplayOutputs(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b,
                                        Tensor aLog, Tensor dtBias, GdnDims dims, Tensor history, Tensor out) {
        checkState(state, dims.numValueHeads() * dims.keyHeadDim() * dims.valueHeadDim());
        checkHistory(history, gdnHistoryWidth(dims), qkv.rows());
        gdnRun(f(state).clone(), layout, qkv, a, b, aLog, dtBias, dims, null, f(history), out);
    }

    /**
     * The gated delta rule on {@code s}; after each token copies it to {@code states[t]} when states is
     * not null, and writes the token's replay history row to {@code hist} when that is not null.
     */
    private static void gdnRun(float[] s, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                               Tensor dtBias, GdnDims dims, Tensor[] states, float[] hist, Tensor out) {
        float[] in = f(qkv);
        float[] as = f(a);
        float[] bs = f(b);
        float[] al = f(aLog);
        float[] dtb = f(dtBias);
        float[] os = f(out);
        int hk = dims.numKeyHeads();
        int hv = dims.numValueHeads();
        int dk = dims.keyHeadDim();
        int dv = dims.valueHeadDim();
        int keyDim = dims.keyDim();
        int perKeyHead = hv / hk;
        int conv = dims.convDim();
        int width = gdnHistoryWidth(dims);
        int hG = keyDim + dims.valueDim();
        int hBeta = hG + hv;
        float qScale = (float) (1.0 / Math.sqrt(dk));
        float[] q = new float[keyDim];
        float[] k = new float[keyDim];
        float[] delta = new float[dv];
        for (int t = 0; t < qkv.rows(); t++) {
            int row = t * conv;
            for (int kh = 0; kh < hk; kh++) {
                l2normalize(in, row + kh * dk, q, kh * dk, dk, qScale);
                l2normalize(in, row + keyDim + kh * dk, k, kh * dk, dk, 1f);
            }
            int hr = t * width;
            if (hist != null) {
                System.arraycopy(k, 0, hist, hr, keyDim);
                System.arraycopy(in, row + 2 * keyDim, hist, hr + keyDim, dims.valueDim());
            }
            for (int h = 0; h < hv; h++) {
                int kOff = (h / perKeyHead) * dk;
                float beta = FastMath.sigmoid(bs[t * hv + h]);
                float g = -(float) Math.exp(al[h]) * FastMath.softplus(as[t * hv + h] + dtb[h]);
                if (hist != null) {
                    hist[hr + hG + h] = g;
                    hist[hr + hBeta + h] = beta;
                }
                gdnToken(s, h * dk * dv, layout, dk, dv, k, kOff, in, row + 2 * keyDim + h * dv,
                        (float) Math.exp(g), beta, delta, q, os, (t * hv + h) * dv);
            }
            if (states != null) {
                System.arraycopy(s, 0, f(states[t]), 0, s.length);
            }
        }
    }

    @Override
    public void gatedDeltaReplay(Tensor state, StateLayout layout, Tensor history, int count, GdnDims dims) {
        float[] s = f(state);
        float[] hs = f(history);
        int hv = dims.numValueHeads();
        int dk = dims.keyHeadDim();
        int dv = dims.valueHeadDim();
        checkState(state, hv * dk * dv);
        int width = gdnHistoryWidth(dims);
        checkHistory(history, width, count);
        int keyDim = dims.keyDim();
        int perKeyHead = hv / dims.numKeyHeads();
        int hG = keyDim + dims.valueDim();
        int hBeta = hG + hv;
        float[] delta = new float[dv];
        for (int j = 0; j < count; j++) {
            int jr = j * width;
            for (int h = 0; h < hv; h++) {
                gdnToken(s, h * dk * dv, layout, dk, dv, hs, jr + (h / perKeyHead) * dk, hs, jr + keyDim + h * dv,
                        (float) Math.exp(hs[jr + hG + h]), hs[jr + hBeta + h], delta, null, null, 0);
            }
        }
    }

    /**
     * One token of one head: {@code S ← S·decay; δ = β(v − Sᵀk); S ← S + kδᵀ}, then, when q is not
     * null, {@code o = Sᵀq} written to {@code o[oOff …]}. k (and q) start at {@code kOff}.
     */
    private static void gdnToken(float[] s, int sOff, StateLayout layout, int dk, int dv, float[] k, int kOff,
                                 float[] v, int vOff, float decay, float beta, float[] delta, float[] q, float[] o,
                                 int oOff) {
        if (layout == StateLayout.KV) {
            scale(s, sOff, dk * dv, decay);
            Arrays.fill(delta, 0f);
            for (int i = 0; i < dk; i++) {
                FastMath.axpy(k[kOff + i], s, sOff + i * dv, delta, 0, dv);
            }
            for (int j = 0; j < dv; j++) {
                delta[j] = (v[vOff + j] - delta[j]) * beta;
            }
            if (q != null) {
                Arrays.fill(o, oOff, oOff + dv, 0f);
            }
            for (int i = 0; i < dk; i++) {
                FastMath.axpy(k[kOff + i], delta, 0, s, sOff + i * dv, dv);
                if (q != null) {
                    FastMath.axpy(q[kOff + i], s, sOff + i * dv, o, oOff, dv);
                }
            }
        } else {
            // Row j of the head's [Dv, Dk] matrix is column j of the KV matrix: it updates on its own.
            for (int j = 0; j < dv; j++) {
                int rOff = sOff + j * dk;
                scale(s, rOff, dk, decay);
                float dj = (v[vOff + j] - FastMath.dot(s, rOff, k, kOff, dk)) * beta;
                FastMath.axpy(dj, k, kOff, s, rOff, dk);
                if (q != null) {
                    o[oOff + j] = FastMath.dot(s, rOff, q, kOff, dk);
                }
            }
        }
    }

    private static int gdnHistoryWidth(GdnDims dims) {
        return dims.keyDim() + dims.valueDim() + 2 * dims.numValueHeads();
    }

    /** {@code dst[dstOff …] = scale · x / sqrt(Σx² + 1e−6)} (the FLA / HF {@code l2norm}). */
    private static void l2normalize(float[] src, int off, float[] dst, int dstOff, int n, float scale) {
        float inv = (float) (1.0 / Math.sqrt(FastMath.dot(src, off, src, off, n) + 1e-6)) * scale;
        for (int i = 0; i < n; i++) {
            dst[dstOff + i] = src[off + i] * inv;
        }
    }

    @Override
    public void transposeState(Tensor state, int heads, int rows, int cols) {
        float[] s = f(state);
        int size = rows * cols;
        if ((long) heads * size != s.length) {
            throw new IllegalArgumentException("transposeState: " + state + " is not [" + heads + ", " + rows + ", "
                    + cols + "]");
        }
        float[] tmp = new float[size];
        for (int h = 0; h < heads; h++) {
            int off = h * size;
            System.arraycopy(s, off, tmp, 0, size);
            for (int r = 0; r < rows; r++) {
                for (int c = 0; c < cols; c++) {
                    s[off + c * rows + r] = tmp[r * cols + c];
                }
            }
        }
    }

    /** {@code a[off …] *= factor}. */
    private static void scale(float[] a, int off, int n, float factor) {
        for (int i = 0; i < n; i++) {
            a[off + i] *= factor;
        }
    }

    private static void checkState(Tensor state, long numel) {
        if (state.numel() != numel) {
            throw new IllegalArgumentException("state " + state + " does not hold " + numel + " elements");
        }
    }

    private static void checkStates(Tensor[] states, int tokens, Tensor state) {
        if (states.length < tokens) {
            throw new IllegalArgumentException(states.length + " state tensors for " + tokens + " tokens");
        }
        for (int t = 0; t < tokens; t++) {
            if (states[t].numel() != state.numel()) {
                throw new IllegalArgumentException("states[" + t + "] " + states[t] + " differs in size from " + state);
            }
        }
    }

    private static void checkHistory(Tensor history, int width, int rows) {
        if (history.cols() != width || rows < 0 || rows > history.rows()) {
            throw new IllegalArgumentException("history " + history + " is not [≥" + rows + ", " + width + "]");
        }
    }

    // ---- sampling ----

    @Override
    public int[] argmax(Tensor logits) {
        float[] ls = f(logits);
        int rows = logits.rows();
        int vocab = logits.cols();
        int[] out = new int[rows];
        SamplingParams greedy = SamplingParams.greedy(1);
        for (int r = 0; r < rows; r++) {
            out[r] = SAMPLER.sample(Arrays.copyOfRange(ls, r * vocab, (r + 1) * vocab), greedy, null);
        }
        return out;
    }

    /**
     * {@link Sampler#probs} of each row, then {@link Sampler#sampleFrom}'s inverse CDF with the given
     * draw in place of {@code rng.nextDouble()}.
     */
    @Override
    public int[] sample(Tensor logits, double[] temperature, int[] topK, double[] topP, double[] uniform) {
        float[] ls = f(logits);
        int rows = logits.rows();
        int vocab = logits.cols();
        SamplingRows.check(rows, vocab, temperature, topK, topP, uniform);
        int[] out = new int[rows];
        for (int r = 0; r < rows; r++) {
            float[] row = Arrays.copyOfRange(ls, r * vocab, (r + 1) * vocab);
            SamplingParams params = SamplingRows.params(r, temperature, topK, topP);
            out[r] = params.isGreedy() ? SAMPLER.sample(row, params, null)
                    : inverseCdf(SAMPLER.probs(row, params), uniform[r]);
        }
        return out;
    }

    /** {@link Sampler#sampleFrom} with the draw {@code u} given. */
    private static int inverseCdf(float[] weights, double u) {
        double total = 0.0;
        for (float w : weights) {
            total += w;
        }
        double target = u * total;
        double cum = 0.0;
        int lastPositive = -1;
        for (int i = 0; i < weights.length; i++) {
            float w = weights[i];
            if (w > 0f) {
                cum += w;
                lastPositive = i;
                if (target < cum) {
                    return i;
                }
            }
        }
        return lastPositive;
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
