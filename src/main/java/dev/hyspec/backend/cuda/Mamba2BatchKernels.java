package dev.hyspec.backend.cuda;

import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import jcuda.driver.CUdeviceptr;

/**
 * The Mamba2 mixer's batched generate-row operations ({@code conv.cu}, {@code mamba2.cu},
 * {@code mamba2_verify.cu}): R rows of T tokens stacked {@code [R·T, ·]}, one launch for all rows.
 * Per-row addresses (states, conv windows, histories, scratch states) and counts go to the device
 * as staged tables, and grid sizes depend only on R, T and the shapes, so a recorded step replays
 * for any rows of the same shape ({@link StepGraphs}).
 *
 * <p>The scans reuse the single-row kernels' p-tile mapping with the row as {@code blockIdx.z}. The
 * replay verify is its own kernel, built for bandwidth: a block holds its state tile in registers
 * as 16-byte vectors (one read, at most one write of each element), stages the per-token vectors in
 * shared memory once, replays, writes S(L) back and computes the outputs from the registers.
 */
final class Mamba2BatchKernels {
    private static final int BLOCK = 256;
    /** As {@code M2V_TC} in mamba2_verify.cu: the most tokens per row the fused replay verify takes. */
    static final int VERIFY_MAX_TOKENS = 8;
    private static final int WARPS = BLOCK / 32;
    /** Grid y/z extent limit: the most rows per launch. */
    private static final int MAX_ROWS = 65535;

    private final CudaRuntime rt;

    Mamba2BatchKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    // ---------------------------------------------------------------- conv

    void causalConv1dBatch(CudaTensor x, CudaTensor[] windows, CudaTensor w, CudaTensor bias, int tokensPerRow,
                           CudaTensor out, boolean advance) {
        int rows = checkRows(windows.length);
        int channels = x.cols();
        if (channels == 0 || w.numel() % channels != 0) {
            throw new IllegalArgumentException("causalConv1dBatch: w " + w + " for " + channels + " channels");
        }
        int width = (int) (w.numel() / channels);
        if (x.rows() != rows * tokensPerRow || out.numel() != x.numel() || (bias != null && bias.numel() != channels)) {
            throw new IllegalArgumentException("causalConv1dBatch: x " + x + " for " + rows + " rows of " + tokensPerRow
                    + " tokens, out " + out + ", bias " + bias);
        }
        for (CudaTensor win : windows) {
            if (win.numel() != (long) channels * (width - 1)) {
                throw new IllegalArgumentException("causalConv1dBatch: window " + win + " for " + channels
                        + " channels of width " + width);
            }
        }
        if (rows == 0 || tokensPerRow == 0) {
            return;
        }
        String wSuffix = DenseKernels.suffix(w.dtype());
        String bSuffix = bias == null ? wSuffix : DenseKernels.suffix(bias.dtype());
        rt.launch("conv1d_batch_" + wSuffix + "_" + bSuffix, DenseKernels.blocks(channels, BLOCK), rows, 1, BLOCK, 0, x,
                rt.stagePointers(windows), w, bias == null ? w : bias, bias == null ? 0 : 1, out, tokensPerRow,
                channels, width, advance ? 1 : 0);
    }

    /**
     * {@code Backend.convStepBatch} in one launch ({@code conv_step_batch}): each row's window moves
     * past its previous inputs, its raw inputs are kept for the next step, and its conv outputs are
     * computed — the work of {@code conv_shift_batch}, {@code copy_batch} and {@code conv1d_batch}.
     */
    void convStepBatch(CudaTensor x, CudaTensor[] windows, CudaTensor[] previous, int[] counts, CudaTensor[] next,
                       CudaTensor w, CudaTensor bias, int tokensPerRow, CudaTensor out) {
        int rows = checkRows(windows.length);
        int channels = x.cols();
        if (previous.length != rows || counts.length != rows || next.length != rows) {
            throw new IllegalArgumentException("convStepBatch: " + rows + " windows, " + previous.length
                    + " previous inputs, " + counts.length + " counts, " + next.length + " next buffers");
        }
        if (channels == 0 || w.numel() % channels != 0) {
            throw new IllegalArgumentException("convStepBatch: w " + w + " for " + channels + " channels");
        }
        int width = (int) (w.numel() / channels);
        if (x.rows() != (long) rows * tokensPerRow || out.numel() != x.numel()
                || (bias != null && bias.numel() != channels)) {
            throw new IllegalArgumentException("convStepBatch: x " + x + " for " + rows + " rows of " + tokensPerRow
                    + " tokens, out " + out + ", bias " + bias);
        }
        for (int r = 0; r < rows; r++) {
            if (windows[r].numel() != (long) channels * (width - 1) || previous[r].cols() != channels
                    || counts[r] < 0 || counts[r] > previous[r].rows() || next[r].cols() != channels
                    || next[r].rows() < tokensPerRow) {
                throw new IllegalArgumentException("convStepBatch row " + r + ": window " + windows[r] + ", previous "
                        + previous[r] + ", count " + counts[r] + ", next " + next[r] + " for " + channels
                        + " channels of width " + width + " and " + tokensPerRow + " tokens");
            }
        }
        if (rows == 0 || tokensPerRow == 0) {
            shiftWindowBatch(windows, previous, counts);
            return;
        }
        String wSuffix = DenseKernels.suffix(w.dtype());
        String bSuffix = bias == null ? wSuffix : DenseKernels.suffix(bias.dtype());
        rt.launch("conv_step_batch_" + wSuffix + "_" + bSuffix, DenseKernels.blocks(channels, BLOCK), rows, 1, BLOCK, 0,
                x, rt.stagePointers(windows), rt.stagePointers(previous), rt.stage(counts), rt.stagePointers(next), w,
                bias == null ? w : bias, bias == null ? 0 : 1, out, tokensPerRow, channels, width);
    }

    void shiftWindowBatch(CudaTensor[] windows, CudaTensor[] xs, int[] counts) {
        int rows = checkRows(windows.length);
        if (xs.length != rows || counts.length != rows) {
            throw new IllegalArgumentException("shiftWindowBatch: " + rows + " windows, " + xs.length + " inputs, "
                    + counts.length + " counts");
        }
        if (rows == 0) {
            return;
        }
        int channels = windows[0].rows();
        int keep = windows[0].cols();
        for (int r = 0; r < rows; r++) {
            if (windows[r].rows() != channels || windows[r].cols() != keep || xs[r].cols() != channels || counts[r] < 0
                    || counts[r] > xs[r].rows()) {
                throw new IllegalArgumentException("shiftWindowBatch row " + r + ": window " + windows[r] + ", x "
                        + xs[r] + ", count " + counts[r]);
            }
        }
        if (keep == 0) {
            return;
        }
        rt.launch("conv_shift_batch", DenseKernels.blocks(channels, BLOCK), rows, 1, BLOCK, 0,
                rt.stagePointers(windows), rt.stagePointers(xs), rt.stage(counts), channels, keep);
    }

    // ---------------------------------------------------------------- scans

    /** {@code mamba2Scan} of every row, states updated in place: one launch, grid (H, p tiles, R). */
    void scanBatch(CudaTensor[] states, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
                   CudaTensor aLog, CudaTensor d, Mamba2Dims dims, int tokensPerRow, CudaTensor y) {
        int rows = checkRowTokens(states, xBC, dtRaw, y, dims, tokensPerRow);
        if (rows == 0 || tokensPerRow == 0) {
            return;
        }
        CUdeviceptr table = rt.stagePointers(states);
        scan("m2_scan_batch_", table, table, layout, xBC, dtRaw, dtBias, aLog, d, dims, rows, tokensPerRow, y);
    }

    /**
     * {@code mamba2ScanStates} of every row (the intermediate-copy verify): {@code states[r]} read once,
     * the state after token t written to {@code scratch[r][t]}. One launch for any T (the destinations
     * are a staged table of R·T addresses).
     */
    void scanStatesBatch(CudaTensor[] states, StateLayout layout, CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias,
                         CudaTensor aLog, CudaTensor d, Mamba2Dims dims, CudaTensor[][] scratch, int tokensPerRow,
                         CudaTensor y) {
        int rows = checkRowTokens(states, xBC, dtRaw, y, dims, tokensPerRow);
        if (scratch.length != rows) {
            throw new IllegalArgumentException("mamba2ScanStatesBatch: " + scratch.length + " scratch rows for " + rows);
        }
        CudaTensor[] flat = new CudaTensor[rows * tokensPerRow];
        for (int r = 0; r < rows; r++) {
            if (scratch[r].length < tokensPerRow) {
                throw new IllegalArgumentException("mamba2ScanStatesBatch: row " + r + " has " + scratch[r].length
                        + " scratch states for " + tokensPerRow + " tokens");
            }
            for (int t = 0; t < tokensPerRow; t++) {
                Mamba2Kernels.checkState(scratch[r][t], dims);
                flat[r * tokensPerRow + t] = scratch[r][t];
            }
        }
        if (rows == 0 || tokensPerRow == 0) {
            return;
        }
        scan("m2_scan_states_batch_", rt.stagePointers(states), rt.stagePointers(flat), layout, xBC, dtRaw, dtBias,
                aLog, d, dims, rows, tokensPerRow, y);
    }

    private void scan(String prefix, CUdeviceptr srcs, CUdeviceptr dsts, StateLayout layout, CudaTensor xBC,
                      CudaTensor dtRaw, CudaTensor dtBias, CudaTensor aLog, CudaTensor d, Mamba2Dims dims, int rows,
                      int tokensPerRow, CudaTensor y) {
        Mamba2Kernels.PMap m = Mamba2Kernels.pmap(layout, dims.headDim(), dims.stateSize());
        int shared = Mamba2Kernels.scanShared(m, dims.stateSize());
        try (Mamba2Kernels.HeadParams hp = new Mamba2Kernels.HeadParams(rt, dtBias, aLog, d, dims.numHeads())) {
            String kernel = prefix + Mamba2Kernels.variant(layout, m) + "_" + hp.suffix;
            Mamba2Kernels.allowShared(rt, kernel, shared);
            rt.launch(kernel, dims.numHeads(), m.tiles(), rows, m.threads(), shared, srcs, dsts, xBC, dtRaw, hp.dtBias,
                    hp.aLog, hp.d, y, tokensPerRow, dims.numHeads(), dims.headDim(), dims.stateSize(), dims.nGroups(),
                    dims.dtMin(), dims.dtMax(), m.ptile(), m.lanes(), m.nsub(), m.k());
        }
    }

    // ---------------------------------------------------------------- replay verify

    /**
     * The replay verify's tile: {@code vec} floats per vector (4: 16-byte loads), {@code ptile} p values
     * per block, {@code lanes} threads per state row, {@code km} vectors per thread (the kernel
     * variant), {@code tiles} blocks per head.
     */
    record VerifyMap(int vec, int ptile, int lanes, int km, int tiles) {}

    /**
     * The tile for a layout and shape, or null where the kernel does not apply (VK rows of more than
     * 512 elements). {@code vec4}: 16-byte vectors are possible (see {@link #vec4}).
     */
    VerifyMap verifyMap(StateLayout layout, int p, int n, boolean vec4) {
        int vec = vec4 ? 4 : 1;
        // The kernel variants _v4_k4 and _v1_k16: 16 state elements per thread. Measured on the H100 at
        // the 8B shape, 8 vectors per thread (a whole head per block) was 5-20 % slower.
        int km = vec == 4 ? 4 : 16;
        int lanes;
        int ptile;
        if (layout == StateLayout.VK) {   // a thread: km vectors of one row p
            lanes = ceilPow2((n / vec + km - 1) / km);
            if (lanes > 32) {
                return null;
            }
            ptile = Math.min(p, BLOCK / lanes);
        } else {                          // a thread: one vector of km rows n
            int minRowThreads = (n + km - 1) / km;
            if (minRowThreads > BLOCK) {
                return null;
            }
            int lanesMax = Math.min(32, Integer.highestOneBit(BLOCK / minRowThreads));
            lanes = Math.min(lanesMax, ceilPow2(p / vec));
            ptile = Math.min(p, lanes * vec);
        }
        return new VerifyMap(vec, ptile, lanes, km, (p + ptile - 1) / ptile);
    }

    /**
     * Whether 16-byte vectors apply: every state, history and token row (and each head's part of
     * it) starts on 16 bytes — P, N and the history width ({@code H·P + G·N + 2H}) multiples of 4,
     * and the tensors aligned.
     */
    private static boolean vec4(Mamba2Dims dims, CudaTensor xBC, CudaTensor[]... perRow) {
        boolean ok = dims.headDim() % 4 == 0 && dims.stateSize() % 4 == 0 && dims.numHeads() % 2 == 0
                && StepGraphs.address(xBC.ptr()) % 16 == 0;
        for (CudaTensor[] ts : perRow) {
            for (CudaTensor t : ts) {
                ok &= StepGraphs.address(t.ptr()) % 16 == 0;
            }
        }
        return ok;
    }

    /** Whether {@link #replayVerifyBatch} runs these rows (else the caller runs the per-row operations). */
    boolean canReplayVerify(StateLayout layout, Mamba2Dims dims, int tokensPerRow, int rows) {
        return tokensPerRow <= VERIFY_MAX_TOKENS && rows <= MAX_ROWS
                && verifyMap(layout, dims.headDim(), dims.stateSize(), false) != null;
    }

    /**
     * Backend.mamba2ReplayVerifyBatch in one launch, grid (p tiles, H, R): see mamba2_verify.cu.
     * Requires {@link #canReplayVerify}.
     */
    void replayVerifyBatch(CudaTensor[] states, StateLayout layout, CudaTensor[] previous, int[] counts,
                           CudaTensor xBC, CudaTensor dtRaw, CudaTensor dtBias, CudaTensor aLog, CudaTensor d,
                           Mamba2Dims dims, CudaTensor[] next, int tokensPerRow, CudaTensor y) {
        int rows = checkRowTokens(states, xBC, dtRaw, y, dims, tokensPerRow);
        int width = Mamba2Kernels.historyWidth(dims);
        if (previous.length != rows || counts.length != rows || next.length != rows) {
            throw new IllegalArgumentException("mamba2ReplayVerifyBatch: " + rows + " states, " + previous.length
                    + " previous histories, " + counts.length + " counts, " + next.length + " next histories");
        }
        for (int r = 0; r < rows; r++) {
            if (previous[r].numel() % width != 0 || counts[r] < 0 || counts[r] > previous[r].numel() / width
                    || next[r].numel() % width != 0 || next[r].numel() / width < tokensPerRow) {
                throw new IllegalArgumentException("mamba2ReplayVerifyBatch row " + r + ": previous " + previous[r]
                        + " (count " + counts[r] + "), next " + next[r] + " for rows of " + width);
            }
            if (StepGraphs.address(previous[r].ptr()) == StepGraphs.address(next[r].ptr())) {
                throw new IllegalArgumentException("mamba2ReplayVerifyBatch row " + r
                        + ": the previous and next histories must be different buffers");
            }
        }
        if (!canReplayVerify(layout, dims, tokensPerRow, rows)) {
            throw new IllegalArgumentException("mamba2ReplayVerifyBatch: no kernel for " + dims + " " + layout + " T="
                    + tokensPerRow);
        }
        if (rows == 0 || tokensPerRow == 0) {
            return;
        }
        boolean vk = layout == StateLayout.VK;
        int n = dims.stateSize();
        boolean v4 = vec4(dims, xBC, states, previous, next);
        if (vk && v4 && n == VK128_N && !verifyKernel().equals("generic")) {
            if (tokensPerRow >= 2 || tileT1Warps() > 0) {
                replayVerifyVk128(states, previous, counts, xBC, dtRaw, dtBias, aLog, d, dims, next, tokensPerRow, y,
                        rows);
                return;
            }
        }
        VerifyMap m = verifyMap(layout, dims.headDim(), n, v4);
        if (m == null) {
            m = verifyMap(layout, dims.headDim(), n, false);   // KV states too tall for 4 rows per thread
        }
        int tc = VERIFY_MAX_TOKENS;
        long floats = 2L * tokensPerRow * n + (long) tokensPerRow * m.ptile()        // B, C, x
                + (long) tc * (m.ptile() + n)                                         // previous row and column vectors
                + 4L * tc + 1 + 2L * tc * tc                                           // scalars
                + (long) tokensPerRow * m.ptile() * (vk ? 1 : WARPS);                  // C . S reduction
        int shared = Math.toIntExact(4 * floats);
        try (Mamba2Kernels.HeadParams hp = new Mamba2Kernels.HeadParams(rt, dtBias, aLog, d, dims.numHeads())) {
            String kernel = "m2_replay_verify_" + (vk ? "vk" : "kv") + "_v" + m.vec() + "_k" + m.km() + "_" + hp.suffix;
            Mamba2Kernels.allowShared(rt, kernel, shared);
            rt.launch(kernel, m.tiles(), dims.numHeads(), rows, BLOCK, shared, rt.stagePointers(states),
                    rt.stagePointers(previous), rt.stage(counts), xBC, dtRaw, hp.dtBias, hp.aLog, hp.d,
                    rt.stagePointers(next), y, tokensPerRow, dims.numHeads(), dims.headDim(), n, dims.nGroups(),
                    dims.dtMin(), dims.dtMax(), m.ptile(), m.lanes());
        }
    }

    /** The state size the VK kernel with a 4 x 4 block per thread and T fixed at compile time takes. */
    private static final int VK128_N = 128;
    /** Up to this T it runs 4 warps a block (16 rows p), above it 8 (32 rows). */
    private static final int VK128_SMALL_T = 4;

    /**
     * The replay verify of VK states with N = 128 and 16-byte vectors, T = 2 … 8: grid (p tiles, H,
     * R), 4 rows p a warp, static shared memory; T ≤ 4 m2_replay_verify_vk128w4_t{T} (128 threads),
     * T ≥ 5 m2_replay_verify_vk128_t{T} (256 threads); T = 1 m2_replay_verify_vk128_t1 (or at 4 warps,
     * see {@link #VERIFY_KERNEL_PROPERTY}). See mamba2_verify.cu.
     */
    private void replayVerifyVk128(CudaTensor[] states, CudaTensor[] previous, int[] counts, CudaTensor xBC,
                                   CudaTensor dtRaw, CudaTensor dtBias, CudaTensor aLog, CudaTensor d,
                                   Mamba2Dims dims, CudaTensor[] next, int tokensPerRow, CudaTensor y, int rows) {
        try (Mamba2Kernels.HeadParams hp = new Mamba2Kernels.HeadParams(rt, dtBias, aLog, d, dims.numHeads())) {
            boolean w4 = tokensPerRow == 1 ? tileT1Warps() == 4 : tokensPerRow <= VK128_SMALL_T;
            String kernel = "m2_replay_verify_vk128" + (w4 ? "w4" : "") + "_t" + tokensPerRow + "_" + hp.suffix;
            int ptile = w4 ? 16 : 32;
            int tiles = (dims.headDim() + ptile - 1) / ptile;
            rt.launch(kernel, tiles, dims.numHeads(), rows, w4 ? 128 : BLOCK, 0, rt.stagePointers(states),
                    rt.stagePointers(previous), rt.stage(counts), xBC, dtRaw, hp.dtBias, hp.aLog, hp.d,
                    rt.stagePointers(next), y, dims.numHeads(), dims.headDim(), dims.nGroups(), dims.dtMin(),
                    dims.dtMax());
        }
    }

    /**
     * Which VK N = 128 replay-verify kernels run ({@code hyspec.mamba2.verify-kernel}, for
     * benchmarks and tests): {@code tile} (default) the one-tile-per-block kernels, T = 1 at 8 warps
     * (m2_replay_verify_vk128_t1: 10 % faster than the generic kernel on the H100 at the 8B shape,
     * batch 32 … 256, bench-results/state-verify-t1-tile-generic.txt); {@code previous} the kernels
     * before that (T = 1: the generic kernel); {@code tile4x4} T = 1 at 4 warps (7-9 % slower, measured
     * before the kernels' scalar warp); {@code generic} every T on the generic kernel.
     */
    static final String VERIFY_KERNEL_PROPERTY = "hyspec.mamba2.verify-kernel";

    /** Warps per block of the tiled kernel at T = 1, or 0 where T = 1 runs the generic kernel (previous, generic). */
    static int tileT1Warps() {
        return switch (verifyKernel()) {
            case "tile4x4" -> 4;
            case "tile" -> 8;
            default -> 0;
        };
    }

    private static String verifyKernel() {
        String k = System.getProperty(VERIFY_KERNEL_PROPERTY, "tile");
        if (!java.util.Set.of("tile", "previous", "tile4x4", "generic").contains(k)) {
            throw new IllegalArgumentException(VERIFY_KERNEL_PROPERTY + "=" + k
                    + ": not tile, previous, tile4x4 or generic");
        }
        return k;
    }

    // ---------------------------------------------------------------- checks

    private static int checkRows(int rows) {
        if (rows > MAX_ROWS) {
            throw new IllegalArgumentException(rows + " rows in one batched launch (at most " + MAX_ROWS + ")");
        }
        return rows;
    }

    /** Checks the per-row states and the stacked token tensors ({@code [R·T, ·]}); returns R. */
    private static int checkRowTokens(CudaTensor[] states, CudaTensor xBC, CudaTensor dtRaw, CudaTensor y,
                                      Mamba2Dims dims, int tokensPerRow) {
        int rows = checkRows(states.length);
        Mamba2Kernels.checkDims(dims);
        Mamba2Kernels.checkTokens(xBC, dtRaw, y, dims);
        if (tokensPerRow < 0 || xBC.rows() != (long) rows * tokensPerRow) {
            throw new IllegalArgumentException("Mamba2 batch: xBC " + xBC + " is not " + rows + " rows of "
                    + tokensPerRow + " tokens");
        }
        for (CudaTensor s : states) {
            Mamba2Kernels.checkState(s, dims);
        }
        return rows;
    }

    private static int ceilPow2(int v) {
        return v <= 1 ? 1 : Integer.highestOneBit(v - 1) << 1;
    }
}
