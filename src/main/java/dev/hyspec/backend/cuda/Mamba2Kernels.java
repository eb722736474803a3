package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.checkpoint.DType;
import java.util.Arrays;
import jcuda.driver.CUdeviceptr;

/**
 * The causal conv1d (prefill and the spec window), the Mamba2 scans, replay and replay outputs, and
 * the state layout conversion ({@code conv.cu}, {@code mamba2.cu}).
 *
 * <p>The state kernels map threads so that each layout's contiguous dimension is coalesced: the
 * scans and replay outputs give a block one head's full {@code N} range for a tile of {@code p}
 * values (VK: {@code L} lanes along {@code n} per {@code p} row; KV: one {@code p} per lane, the
 * {@code n} range split over {@code nsub} thread rows); replay updates each head's matrix
 * elementwise in tiles of rows. Every state element is read once and written at most once per
 * call (scan-states: once per token).
 */
final class Mamba2Kernels {
    private static final int BLOCK = 256;
    /** As {@code M2_MAXK}, {@code M2_TC}, {@code M2_MAXS}, {@code M2_RJ}, {@code M2_REPT} in mamba2.cu. */
    private static final int MAXK = 16;
    static final int TC = 8;
    static final int MAXS = 8;
    private static final int RJ = 16;
    private static final int REPT = 8;
    private static final int DEFAULT_SHARED = 48 << 10;
    static final int MAX_SHARED = 227 << 10;

    private final CudaRuntime rt;

    Mamba2Kernels(CudaRuntime rt) {
        this.rt = rt;
    }

    // ---------------------------------------------------------------- conv

    void causalConv1d(CudaTensor x, CudaTensor window, CudaTensor w, CudaTensor bias, CudaTensor out, boolean advance) {
        int tokens = x.rows();
        int channels = x.cols();
        if (channels == 0 || w.numel() % channels != 0) {
            throw new IllegalArgumentException("causalConv1d: w " + w + " for " + channels + " channels");
        }
        int width = (int) (w.numel() / channels);
        int keep = width - 1;
        if (window.numel() != (long) channels * keep || out.numel() != x.numel()
                || (bias != null && bias.numel() != channels)) {
            throw new IllegalArgumentException("causalConv1d: x " + x + ", window " + window + ", w " + w + ", bias "
                    + bias + ", out " + out);
        }
        String wSuffix = DenseKernels.suffix(w.dtype());
        String bSuffix = bias == null ? wSuffix : DenseKernels.suffix(bias.dtype());
        long n = (long) tokens * channels;
        rt.launch("conv1d_" + wSuffix + "_" + bSuffix, DenseKernels.blocks(n, BLOCK), 1, 1, BLOCK, 0, x, window, w,
                bias == null ? w : bias, bias == null ? 0 : 1, out, tokens, channels, width);
        if (advance) {
            shift(window, x, tokens, channels, keep);
        }
    }

    void shiftWindow(CudaTensor window, CudaTensor x, int count) {
        int channels = window.rows();
        int keep = window.cols();
        if (x.cols() != channels || count < 0 || count > x.rows()) {
            throw new IllegalArgumentException("shiftWindow: window " + Arrays.toString(window.shape()) + ", x "
                    + Arrays.toString(x.shape()) + ", count " + count);
        }
        shift(window, x, count, channels, keep);
    }

    private void shift(CudaTensor window, CudaTensor x, int count, int channels, int keep) {
        if (count == 0 || keep == 0) {
            return;
        }
        rt.launch("conv_shift", DenseKernels.blocks(channels, BLOCK), 1, 1, BLOCK, 0, window, x, count, channels, keep);
    }

    // ---------------------------------------------------------------- thread mapping

    /**
     * The p-tile mapping of mamba2.cu: {@code ptile} p values per block, {@code lanes} (VK: threads
     * per p row along n; KV: threads along p), {@code nsub} (KV: thread rows splitting n), {@code k}
     * state elements per thread, {@code threads} per block, {@code tiles} blocks per head.
     */
    record PMap(int ptile, int lanes, int nsub, int k, int threads, int tiles) {}

    static PMap pmap(StateLayout layout, int p, int n) {
        if (layout == StateLayout.VK) {
            int lanes = Math.min(32, Integer.highestOneBit(Math.max(1, n - 1)) << 1);
            int k = (n + lanes - 1) / lanes;
            if (k > MAXK) {
                throw new IllegalArgumentException("Mamba2 state size " + n + " is above " + MAXK * 32);
            }
            int ptile = BLOCK / lanes;
            return new PMap(ptile, lanes, lanes, k, BLOCK, (p + ptile - 1) / ptile);
        }
        int ptile = Math.min(16, p);   // 64-byte row segments: whole sectors, and twice the blocks of 32
        int nsub = Math.max(BLOCK / ptile, (n + MAXK - 1) / MAXK);
        nsub = Math.min(nsub, Math.max(1, n));
        int threads = (ptile * nsub + 31) / 32 * 32;   // whole warps; threads past ptile·nsub stay idle
        if (threads > 1024) {
            throw new IllegalArgumentException("Mamba2 state size " + n + " is too large for the KV kernels");
        }
        int k = (n + nsub - 1) / nsub;
        return new PMap(ptile, ptile, nsub, k, threads, (p + ptile - 1) / ptile);
    }

    /** The kernel-name part for a layout and a mapping: {@code vk_k4}, {@code kv_k16}, … */
    static String variant(StateLayout layout, PMap m) {
        int km = m.k() <= 4 ? 4 : m.k() <= 8 ? 8 : 16;
        return (layout == StateLayout.VK ? "vk" : "kv") + "_k" + km;
    }

    static void allowShared(CudaRuntime rt, String kernel, int bytes) {
        if (bytes > MAX_SHARED) {
            throw new IllegalArgumentException(kernel + " needs " + bytes + " bytes of shared memory");
        }
        if (bytes > DEFAULT_SHARED) {
            rt.allowSharedMemory(kernel, bytes);
        }
    }

    /** dtBias, aLog and d in one dtype (as a checkpoint stores them), or all three widened to float32 temporaries. */
    static final class HeadParams implements AutoCloseable {
        final Object dtBias;
        final Object aLog;
        final Object d;
        final String suffix;
        private final CudaRuntime rt;
        private final CUdeviceptr temp;

        HeadParams(CudaRuntime rt, CudaTensor dtBias, CudaTensor aLog, CudaTensor d, int heads) {
            this.rt = rt;
            if (dtBias.numel() != heads || aLog.numel() != heads || d.numel() != heads) {
                throw new IllegalArgumentException("Mamba2 dtBias " + dtBias + ", aLog " + aLog + ", d " + d + " for "
                        + heads + " heads");
            }
            if (dtBias.dtype() == aLog.dtype() && aLog.dtype() == d.dtype()) {
                this.dtBias = dtBias;
                this.aLog = aLog;
                this.d = d;
                this.suffix = DenseKernels.suffix(dtBias.dtype());
                this.temp = null;
            } else {
                this.temp = rt.memory().alloc(3L * heads * 4);
                CudaTensor[] src = {dtBias, aLog, d};
                CUdeviceptr[] dst = new CUdeviceptr[3];
                for (int i = 0; i < 3; i++) {
                    dst[i] = temp.withByteOffset((long) i * heads * 4);
                    rt.launch("m2_widen_" + DenseKernels.suffix(src[i].dtype()), DenseKernels.blocks(heads, BLOCK), 1,
                            1, BLOCK, 0, src[i], dst[i], heads);
                }
                this.dtBias = dst[0];
                this.aLog = dst[1];
                this.d = dst[2];
                this.suffix = DenseKernels.suffix(DType.F32);
            }
        }

        @Override
        public void close() {
            if (temp != null) {
                rt.memory().release(temp);   // work runs in stream order: safe to reuse after the launches
            }
        }
    }

    static void checkDims(Mamba2Dims dims) {
        if (dims.numHeads() <= 0 || dims.nGroups() <= 0 || dims.numHeads() % dims.nGroups() != 0 || dims.headDim() <= 0
                || dims.stateSize() <= 0) {
            throw new IllegalArgumentException("Mamba2 dims " + dims);
        }
    }

    static long stateSize(Mamba2Dims dims) {
        return (long) dims.numHeads() * dims.headDim() * dims.stateSize();
    }

    static void checkState(CudaTensor state, Mamba2Dims dims) {
        if (state.numel() != stateSize(dims)) {
            throw new IllegalArgumentException("state " + state + " does not hold " + stateSize(dims) + " elements");
        }
    }

    static void checkTokens(CudaTensor xBC, CudaTensor dtRaw, CudaTensor y, Mamba2Dims dims) {
        int tokens = xBC.rows();
        if (xBC.numel() != (long) tokens * dims.convDim() || dtRaw.numel() != (long) tokens * dims.numHeads()
                || y.numel() != (long) tokens * dims.innerSize()) {
            throw new IllegalArgumentException("Mamba2 xBC " + xBC + ", dtRaw " + dtRaw + ", y " + y + " for " + dims);
        }
    }

    static int historyWidth(Mamba2Dims dims) {
        return dims.innerSize() + dims.nGroups() * dims.stateSize() + 2 * dims.numHeads();
    }

    // ---------------------------------------------------------------- scans

    /** Shared memory of the scan kernels: x, B, C and dt, decay staging plus the KV reduction. */
    static int scanShared(PMap m, int n) {
        return 4 * (TC * m.ptile() + 2 * TC * n + 2 * TC + 2 * m.nsub() * m.ptile());
    }

    void scan(CudaTensor state, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
              CudaTensor aLog, CudaTensor d, Mamba2Dims dims, CudaTensor y) {
        checkDims(dims);
        checkState(state, dims);
        checkTokens(xBC, dtRaw, y, dims);
        int tokens = xBC.rows();
        if (tokens == 0) {
            return;
        }
        PMap m = pmap(layout, dims.headDim(), dims.stateSize());
        String kernel;
        int shared = scanShared(m, dims.stateSize());
        try (HeadParams hp = new HeadParams(rt, dtBias, aLog, d, dims.numHeads())) {
            kernel = "m2_scan_" + variant(layout, m) + "_" + hp.suffix;
            allowShared(rt, kernel, shared);
            rt.launch(kernel, dims.numHeads(), m.tiles(), 1, m.threads(), shared,
                    state, state, state, state, state, state, state, state, state, state,
                    xBC, dtRaw, hp.dtBias, hp.aLog, hp.d, y, tokens, dims.numHeads(), dims.headDim(), dims.stateSize(),
                    dims.nGroups(), dims.dtMin(), dims.dtMax(), m.ptile(), m.lanes(), m.nsub(), m.k());
        }
    }

    /**
     * One launch per {@value #MAXS} tokens: each reads the state once (the previous launch's last
     * state after the first) and writes the state after each of its tokens to its destination.
     */
    void scanStates(CudaTensor state, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
                    CudaTensor aLog, CudaTensor d, Mamba2Dims dims, CudaTensor[] states, CudaTensor y) {
        checkDims(dims);
        checkState(state, dims);
        checkTokens(xBC, dtRaw, y, dims);
        int tokens = xBC.rows();
        if (states.length < tokens) {
            throw new IllegalArgumentException(states.length + " state tensors for " + tokens + " tokens");
        }
        for (int t = 0; t < tokens; t++) {
            checkState(states[t], dims);
        }
        if (tokens == 0) {
            return;
        }
        PMap m = pmap(layout, dims.headDim(), dims.stateSize());
        int shared = scanShared(m, dims.stateSize());
        int conv = dims.convDim();
        try (HeadParams hp = new HeadParams(rt, dtBias, aLog, d, dims.numHeads())) {
            String kernel = "m2_scan_states_" + variant(layout, m) + "_" + hp.suffix;
            allowShared(rt, kernel, shared);
            for (int t0 = 0; t0 < tokens; t0 += MAXS) {
                int count = Math.min(MAXS, tokens - t0);
                CudaTensor src = t0 == 0 ? state : states[t0 - 1];
                Object[] dst = new Object[MAXS];
                for (int i = 0; i < MAXS; i++) {
                    dst[i] = states[t0 + Math.min(i, count - 1)];
                }
                rt.launch(kernel, dims.numHeads(), m.tiles(), 1, m.threads(), shared,
                        src, src, dst[0], dst[1], dst[2], dst[3], dst[4], dst[5], dst[6], dst[7],
                        xBC.at((long) t0 * conv), dtRaw.at((long) t0 * dims.numHeads()), hp.dtBias, hp.aLog, hp.d,
                        y.at((long) t0 * dims.innerSize()), count, dims.numHeads(), dims.headDim(), dims.stateSize(),
                        dims.nGroups(), dims.dtMin(), dims.dtMax(), m.ptile(), m.lanes(), m.nsub(), m.k());
            }
        }
    }

    // ---------------------------------------------------------------- replay

    void replay(CudaTensor state, StateLayout layout, CudaTensor history, int count, Mamba2Dims dims) {
        checkDims(dims);
        checkState(state, dims);
        int width = historyWidth(dims);
        if (count < 0 || history.numel() % width != 0 || history.numel() / width < count) {
            throw new IllegalArgumentException("mamba2Replay: history " + history + " for " + count + " rows of "
                    + width);
        }
        if (count == 0) {
            return;
        }
        boolean vk = layout == StateLayout.VK;
        int rows = vk ? dims.headDim() : dims.stateSize();
        int cols = vk ? dims.stateSize() : dims.headDim();
        if (cols > REPT * BLOCK) {
            throw new IllegalArgumentException("mamba2Replay: rows of " + cols + " are above " + REPT * BLOCK);
        }
        int tileRows = Math.min(rows, Math.max(1, REPT * BLOCK / cols));
        int shared = 4 * (RJ * tileRows + RJ * cols);
        allowShared(rt, "m2_replay", shared);
        rt.launch("m2_replay", dims.numHeads(), (rows + tileRows - 1) / tileRows, 1, BLOCK, shared, state, history,
                count, dims.numHeads(), dims.headDim(), dims.stateSize(), dims.nGroups(), vk ? 1 : 0, tileRows);
    }

    void replayOutputs(CudaTensor state, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
                       CudaTensor aLog, CudaTensor d, Mamba2Dims dims, CudaTensor history, CudaTensor y) {
        checkDims(dims);
        checkState(state, dims);
        checkTokens(xBC, dtRaw, y, dims);
        int tokens = xBC.rows();
        int width = historyWidth(dims);
        if (history.numel() % width != 0 || history.numel() / width < tokens) {
            throw new IllegalArgumentException("mamba2ReplayOutputs: history " + history + " for " + tokens
                    + " rows of " + width);
        }
        if (tokens == 0) {
            return;
        }
        PMap m = pmap(layout, dims.headDim(), dims.stateSize());
        int n = dims.stateSize();
        long kvReduce = layout == StateLayout.KV ? (long) TC * m.nsub() * m.ptile() : 0;
        boolean small = tokens <= TC;
        // Verify widths (T <= TC): everything staged at once, one memory latency deep. Longer calls:
        // the general kernel, C staged TC tokens at a time.
        long shared = small
                ? 4L * (2L * tokens * n + (long) tokens * m.ptile() + 2L * TC + (long) TC * TC + (long) TC * m.ptile()
                        + kvReduce)
                : 4L * (2L * tokens + (long) tokens * tokens + (long) tokens * m.ptile() + (long) TC * n + kvReduce);
        if (shared > MAX_SHARED) {
            throw new IllegalArgumentException("mamba2ReplayOutputs: " + tokens + " tokens need " + shared
                    + " bytes of shared memory");
        }
        try (HeadParams hp = new HeadParams(rt, dtBias, aLog, d, dims.numHeads())) {
            String kernel = (small ? "m2_ro_small_" : "m2_replay_outputs_") + variant(layout, m) + "_" + hp.suffix;
            allowShared(rt, kernel, (int) shared);
            rt.launch(kernel, dims.numHeads(), m.tiles(), 1, m.threads(), (int) shared, state, xBC, dtRaw, hp.dtBias,
                    hp.aLog, hp.d, history, y, tokens, dims.numHeads(), dims.headDim(), dims.stateSize(),
                    dims.nGroups(), dims.dtMin(), dims.dtMax(), m.ptile(), m.lanes(), m.nsub(), m.k());
        }
    }

    // ---------------------------------------------------------------- layout

    void transposeState(CudaTensor state, int heads, int rows, int cols) {
        long size = (long) rows * cols;
        if (heads < 0 || rows < 0 || cols < 0 || (long) heads * size != state.numel()) {
            throw new IllegalArgumentException("transposeState: " + state + " is not [" + heads + ", " + rows + ", "
                    + cols + "]");
        }
        if (size == 0 || heads == 0 || rows == 1 || cols == 1) {
            return;   // nothing moves
        }
        long shared = 4L * rows * (cols + 1);
        if (shared <= MAX_SHARED) {
            allowShared(rt, "m2_transpose_inplace", (int) shared);
            rt.launch("m2_transpose_inplace", heads, 1, 1, BLOCK, (int) shared, state, rows, cols);
            return;
        }
        long n = state.numel();
        long bytes = n * 4;
        CUdeviceptr temp = rt.memory().alloc(bytes);
        try {
            rt.launch("m2_copy", DenseKernels.blocks(n, BLOCK), 1, 1, BLOCK, 0, state, temp, n);
            rt.launch("m2_transpose", (cols + 31) / 32, (rows + 31) / 32, heads, BLOCK, 0, temp, state, rows, cols);
        } finally {
            rt.memory().release(temp);   // stream order: the launches above finish before any reuse
        }
    }
}
