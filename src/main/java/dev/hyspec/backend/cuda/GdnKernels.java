package dev.hyspec.backend.cuda;

import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.StateLayout;

/**
 * The Gated DeltaNet scans, replay and replay outputs ({@code gdn.cu}). One kernel per operation,
 * layout and rows per lane: a block owns a tile of value columns of one value head and keeps them
 * in registers over all tokens of the call (KV: 512 threads, 16 columns; VK: 128 threads, 4
 * columns, one warp per column), so the state is read once and, where the operation updates it,
 * written once; per-token inputs are staged in shared memory, 16 tokens at a time. The weights
 * {@code aLog} and {@code dtBias} may each be F32, BF16 or F16 (passed as dtype codes the kernel
 * switches on, rather than one kernel per combination). Scan-states writes 8 states per launch
 * (pointer arguments: the driver API gives no host-side address to stage an array of them).
 *
 * <p>The batched forms (R rows of T tokens) are one launch each whatever R, over (column tiles,
 * Hv, R): the per-row states, histories, scratch states and replay counts reach the kernel as one
 * staged device table (one host-to-device copy), so the launch's arguments and grid depend only on
 * R, T and the shapes and a captured step replays for any rows. Small batches use the per-row
 * kernels' mapping with two columns per thread; larger ones the wide mapping, where a warp owns 8
 * columns with the rows along its lanes (see {@code gdn.cu}). Measured on the H100 at the Qwen3.5
 * shape, the wide mapping wins from R·T = 32 on (replay verify at R = 64, T = 4: 2.2–2.6× the
 * 2·|S| floor, the narrow one 3.5–4.3×) and the narrow one at R·T ≤ 8.
 */
final class GdnKernels {
    /** States written per launch of the scan-states kernel (its pointer arguments). */
    static final int STATES_PER_LAUNCH = 8;
    /** The largest key head dim the kernels hold in registers (8 rows per lane). */
    static final int MAX_KEY_HEAD_DIM = 256;

    /** Columns a warp of the wide batched mapping owns, and its warps per block. */
    private static final int WIDE_COLUMNS = 8;
    private static final int WIDE_WARPS = 8;
    /** The largest key head dim of the wide mapping (4 rows per lane). */
    private static final int WIDE_MAX_KEY_HEAD_DIM = 128;
    /** Tokens of a batched call (R·T) from which the wide mapping is chosen (measured: see above). */
    private static final int WIDE_MIN_TOKENS = 16;

    private final CudaRuntime rt;
    /** Batched launches: value columns per thread (2: narrow, 8: wide), 0 = chosen per launch. */
    private int batchColumns;

    GdnKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    /**
     * Fixes the mapping of batched launches (benchmarks and tests): 2 columns per thread (narrow), 8
     * (wide, where the key head dim is at most 128), or 0 to choose per launch.
     */
    void batchMapping(int columnsPerThread) {
        if (columnsPerThread != 0 && columnsPerThread != 2 && columnsPerThread != WIDE_COLUMNS) {
            throw new IllegalArgumentException("batch mapping of " + columnsPerThread + " columns per thread");
        }
        this.batchColumns = columnsPerThread;
    }

    void scan(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b, CudaTensor aLog,
              CudaTensor dtBias, GdnDims dims, CudaTensor out) {
        int tokens = checkTokens("gatedDeltaScan", state, qkv, a, b, aLog, dtBias, dims, out);
        if (tokens == 0) {
            return;
        }
        int[] hd = packed(dims);
        launch("scan", layout, dims, state, qkv, a, b, aLog, dtBias, out, state, tokens, hd[0], hd[1],
                types(aLog, dtBias));
    }

    void scanStates(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                    CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor[] states, CudaTensor out) {
        int tokens = checkTokens("gatedDeltaScanStates", state, qkv, a, b, aLog, dtBias, dims, out);
        if (states.length < tokens) {
            throw new IllegalArgumentException("gatedDeltaScanStates: " + states.length + " states for " + tokens
                    + " tokens");
        }
        for (int t = 0; t < tokens; t++) {
            CudaTensor s = states[t];
            if (s.numel() != state.numel()) {
                throw new IllegalArgumentException("gatedDeltaScanStates: state " + s + " is not the shape of " + state);
            }
        }
        int conv = dims.convDim();
        int hv = dims.numValueHeads();
        int valueDim = dims.valueDim();
        int[] hd = packed(dims);
        int types = types(aLog, dtBias);
        // Chunks of STATES_PER_LAUNCH tokens; chunk c starts from the state chunk c−1 wrote last.
        for (int t0 = 0; t0 < tokens; t0 += STATES_PER_LAUNCH) {
            int n = Math.min(STATES_PER_LAUNCH, tokens - t0);
            CudaTensor from = t0 == 0 ? state : states[t0 - 1];
            Object[] args = new Object[7 + STATES_PER_LAUNCH + 4];
            args[0] = from;
            args[1] = qkv.at((long) t0 * conv);
            args[2] = a.at((long) t0 * hv);
            args[3] = b.at((long) t0 * hv);
            args[4] = aLog;
            args[5] = dtBias;
            args[6] = out.at((long) t0 * valueDim);
            for (int i = 0; i < STATES_PER_LAUNCH; i++) {
                args[7 + i] = states[t0 + Math.min(i, n - 1)];   // pointers past the chunk are never written
            }
            args[7 + STATES_PER_LAUNCH] = n;
            args[8 + STATES_PER_LAUNCH] = hd[0];
            args[9 + STATES_PER_LAUNCH] = hd[1];
            args[10 + STATES_PER_LAUNCH] = types;
            launch("states", layout, dims, args);
        }
    }

    void replay(CudaTensor state, StateLayout layout, CudaTensor history, int count, GdnDims dims) {
        checkState("gatedDeltaReplay", state, dims);
        checkHistory("gatedDeltaReplay", history, dims, count);
        if (count == 0) {
            return;
        }
        int[] hd = packed(dims);
        launch("replay", layout, dims, state, history, count, hd[0], hd[1]);
    }

    void replayOutputs(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                       CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor history, CudaTensor out) {
        int tokens = checkTokens("gatedDeltaReplayOutputs", state, qkv, a, b, aLog, dtBias, dims, out);
        checkHistory("gatedDeltaReplayOutputs", history, dims, tokens);
        if (tokens == 0) {
            return;
        }
        int[] hd = packed(dims);
        launch("replay_out", layout, dims, state, qkv, a, b, aLog, dtBias, out, history, tokens, hd[0], hd[1],
                types(aLog, dtBias));
    }

    // ---- batched generate rows ----

    /** {@code gatedDeltaScanBatch}: plain decode of R rows, {@code states[r]} in place. */
    void scanBatch(CudaTensor[] states, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                   CudaTensor aLog, CudaTensor dtBias, GdnDims dims, int tokensPerRow, CudaTensor out) {
        String op = "gatedDeltaScanBatch";
        checkBatch(op, states, qkv, a, b, aLog, dtBias, dims, tokensPerRow, out);
        if (states.length == 0 || tokensPerRow == 0) {
            return;
        }
        launchBatch("scan_batch", layout, dims, table(0, states), states.length, tokensPerRow, qkv, a, b, aLog, dtBias,
                out);
    }

    /** {@code gatedDeltaScanStatesBatch}: the state after token t of row r written to {@code scratch[r][t]}. */
    void scanStatesBatch(CudaTensor[] states, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                         CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor[][] scratch, int tokensPerRow,
                         CudaTensor out) {
        String op = "gatedDeltaScanStatesBatch";
        checkBatch(op, states, qkv, a, b, aLog, dtBias, dims, tokensPerRow, out);
        int rows = states.length;
        if (scratch.length != rows) {
            throw new IllegalArgumentException(op + ": " + scratch.length + " scratch rows for " + rows + " states");
        }
        CudaTensor[] flat = new CudaTensor[rows * tokensPerRow];   // [R·T]
        for (int r = 0; r < rows; r++) {
            if (scratch[r].length < tokensPerRow) {
                throw new IllegalArgumentException(op + ": row " + r + " has " + scratch[r].length
                        + " scratch states for " + tokensPerRow + " tokens");
            }
            for (int t = 0; t < tokensPerRow; t++) {
                CudaTensor s = scratch[r][t];
                if (s.numel() != states[r].numel()) {
                    throw new IllegalArgumentException(op + ": scratch state " + s + " of row " + r
                            + " is not the shape of " + states[r]);
                }
                flat[r * tokensPerRow + t] = s;
            }
        }
        if (rows == 0 || tokensPerRow == 0) {
            return;
        }
        launchBatch("states_batch", layout, dims, table(0, states, flat), rows, tokensPerRow, qkv, a, b, aLog, dtBias,
                out);
    }

    /**
     * {@code gatedDeltaReplayVerifyBatch}: per row, replay {@code counts[r]} rows of {@code previous[r]}
     * on chip, write S(L) back once (not where the count is 0), then the T tokens' outputs from it and
     * their history rows into {@code next[r]}.
     */
    void replayVerifyBatch(CudaTensor[] states, StateLayout layout, CudaTensor[] previous, int[] counts,
                           CudaTensor qkv, CudaTensor a, CudaTensor b, CudaTensor aLog, CudaTensor dtBias,
                           GdnDims dims, CudaTensor[] next, int tokensPerRow, CudaTensor out) {
        String op = "gatedDeltaReplayVerifyBatch";
        checkBatch(op, states, qkv, a, b, aLog, dtBias, dims, tokensPerRow, out);
        int rows = states.length;
        if (previous.length != rows || counts.length != rows || next.length != rows) {
            throw new IllegalArgumentException(op + ": " + rows + " states but " + previous.length + " previous, "
                    + counts.length + " counts, " + next.length + " next histories");
        }
        for (int r = 0; r < rows; r++) {
            checkHistory(op, previous[r], dims, counts[r]);
            checkHistory(op, next[r], dims, tokensPerRow);
            if (overlap(previous[r], next[r])) {
                throw new IllegalArgumentException(op + ": row " + r + " reads and writes the same history "
                        + next[r] + " (the replay history is double-buffered)");
            }
        }
        if (rows == 0 || tokensPerRow == 0) {
            return;
        }
        long[] table = table(rows, states, previous, next);   // then the counts
        for (int r = 0; r < rows; r++) {
            table[3 * rows + r] = counts[r];
        }
        launchBatch("replay_verify", layout, dims, table, rows, tokensPerRow, qkv, a, b, aLog, dtBias, out);
    }

    /**
     * The row table a batched kernel reads: the device addresses of the tensors, group after group,
     * then {@code extra} values the caller fills.
     */
    private static long[] table(int extra, CudaTensor[]... groups) {
        int n = extra;
        for (CudaTensor[] g : groups) {
            n += g.length;
        }
        long[] out = new long[n];
        int i = 0;
        for (CudaTensor[] g : groups) {
            for (CudaTensor t : g) {
                out[i++] = StepGraphs.address(t.ptr());
            }
        }
        return out;
    }

    /**
     * Launches a batched kernel over (value-column tiles, value heads, rows): {@code gdn_OP_wide_LAYOUT_rR}
     * (256 threads, 64 columns a block) or {@code gdn_OP_LAYOUT_rR_c2} (the per-row kernels' blocks,
     * two columns per thread), the row table staged in one copy.
     */
    private void launchBatch(String op, StateLayout layout, GdnDims dims, long[] table, int rows, int tokensPerRow,
                             CudaTensor qkv, CudaTensor a, CudaTensor b, CudaTensor aLog, CudaTensor dtBias,
                             CudaTensor out) {
        if (rows > 0xffff) {
            throw new IllegalArgumentException("a batched Gated DeltaNet launch takes at most 65535 rows, not " + rows);
        }
        boolean kv = layout == StateLayout.KV;
        int lanes = rowsPerLane(dims.keyHeadDim());
        int dv = dims.valueHeadDim();
        int hv = dims.numValueHeads();
        boolean wide = dims.keyHeadDim() <= WIDE_MAX_KEY_HEAD_DIM
                && (batchColumns == 0 ? (long) rows * tokensPerRow >= WIDE_MIN_TOKENS : batchColumns == WIDE_COLUMNS);
        String kernel;
        int gridX;
        int threads;
        if (wide) {
            kernel = "gdn_" + op + "_wide_" + (kv ? "kv" : "vk") + "_r" + lanes;
            gridX = (dv + WIDE_COLUMNS * WIDE_WARPS - 1) / (WIDE_COLUMNS * WIDE_WARPS);
            threads = 32 * WIDE_WARPS;
        } else {
            int columns = (kv ? 16 : 4) * 2;
            kernel = "gdn_" + op + "_" + (kv ? "kv" : "vk") + "_r" + lanes + "_c2";
            gridX = (dv + columns - 1) / columns;
            threads = kv ? 512 : 128;
        }
        boolean aligned = true;   // every state address 16-byte aligned: the wide KV kernels then move float4
        for (int i = 0; i < table.length - (op.equals("replay_verify") ? 3 * rows : 0); i++) {
            aligned &= table[i] % 16 == 0;
        }
        int[] hd = packed(dims);
        rt.launch(kernel, gridX, hv, rows, threads, 0, rt.stage(table), qkv, a, b, aLog, dtBias, out, tokensPerRow,
                rows, hd[0], hd[1], types(aLog, dtBias) | (aligned ? 1 << 16 : 0));
    }

    /** Whether two tensors share device memory. */
    private static boolean overlap(CudaTensor x, CudaTensor y) {
        long ax = StepGraphs.address(x.ptr());
        long ay = StepGraphs.address(y.ptr());
        long bx = x.numel() * x.dtype().bytes();
        long by = y.numel() * y.dtype().bytes();
        return ax < ay + by && ay < ax + bx;
    }

    /**
     * Launches {@code gdn_OP_LAYOUT_rR} over (value-column tiles, value heads), one row. Few
     * arguments on purpose: every one costs host time in the launch.
     */
    private void launch(String op, StateLayout layout, GdnDims dims, Object... args) {
        int rows = rowsPerLane(dims.keyHeadDim());
        boolean kv = layout == StateLayout.KV;
        int columns = kv ? 16 : 4;
        int threads = kv ? 512 : 128;
        String kernel = "gdn_" + op + "_" + (kv ? "kv" : "vk") + "_r" + rows;
        rt.launch(kernel, (dims.valueHeadDim() + columns - 1) / columns, dims.numValueHeads(), 1, threads, 0, args);
    }

    /** {@code {Hk | Hv << 16, Dk | Dv << 16}}, as the kernels take them. */
    private static int[] packed(GdnDims d) {
        return new int[] {d.numKeyHeads() | d.numValueHeads() << 16, d.keyHeadDim() | d.valueHeadDim() << 16};
    }

    /** The weights' dtype codes (0 f32, 1 bf16, 2 f16): aLog's in bits 0–7, dtBias's in bits 8–15. */
    private static int types(CudaTensor aLog, CudaTensor dtBias) {
        return dtypeCode(aLog) | dtypeCode(dtBias) << 8;
    }

    /** Rows of a state column each lane holds: ceil(Dk / 32) rounded up to a power of two (1, 2, 4 or 8). */
    static int rowsPerLane(int dk) {
        if (dk <= 0 || dk > MAX_KEY_HEAD_DIM) {
            throw new IllegalArgumentException("Gated DeltaNet key head dim " + dk + " outside 1…" + MAX_KEY_HEAD_DIM);
        }
        int r = 1;
        while (r * 32 < dk) {
            r <<= 1;
        }
        return r;
    }

    private static int dtypeCode(CudaTensor w) {
        return switch (w.dtype()) {
            case F32 -> 0;
            case BF16 -> 1;
            case F16 -> 2;
        };
    }

    // ---- argument checks ----

    private static void checkDims(String op, GdnDims dims) {
        if (dims.numKeyHeads() <= 0 || dims.numValueHeads() <= 0 || dims.valueHeadDim() <= 0
                || dims.numValueHeads() % dims.numKeyHeads() != 0 || dims.numValueHeads() > 0xffff
                || dims.valueHeadDim() > 0xffff) {
            throw new IllegalArgumentException(op + ": unsupported dims " + dims);
        }
        rowsPerLane(dims.keyHeadDim());
    }

    private static void checkState(String op, CudaTensor state, GdnDims dims) {
        checkDims(op, dims);
        long n = (long) dims.numValueHeads() * dims.keyHeadDim() * dims.valueHeadDim();
        if (state.numel() != n) {
            throw new IllegalArgumentException(op + ": state " + state + " does not hold " + n + " elements for " + dims);
        }
    }

    private static void checkHistory(String op, CudaTensor history, GdnDims dims, int rows) {
        int width = dims.keyDim() + dims.valueDim() + 2 * dims.numValueHeads();
        int[] s = history.shape();
        if (s.length != 2 || s[1] != width || rows < 0 || s[0] < rows) {
            throw new IllegalArgumentException(op + ": history " + history + " is not [>=" + rows + ", " + width + "]");
        }
    }

    /** Checks the shapes of a batched call: R states, token inputs {@code [R·T, ·]}. */
    private static void checkBatch(String op, CudaTensor[] states, CudaTensor qkv, CudaTensor a, CudaTensor b,
                                   CudaTensor aLog, CudaTensor dtBias, GdnDims dims, int tokensPerRow,
                                   CudaTensor out) {
        if (states.length == 0) {
            checkDims(op, dims);
            return;
        }
        int tokens = checkTokens(op, states[0], qkv, a, b, aLog, dtBias, dims, out);
        if (tokensPerRow < 0 || tokens != (long) states.length * tokensPerRow) {
            throw new IllegalArgumentException(op + ": qkv " + qkv + " does not hold " + states.length + " rows of "
                    + tokensPerRow + " tokens");
        }
        for (CudaTensor s : states) {
            checkState(op, s, dims);
        }
    }

    /** Checks shapes; returns T. */
    private static int checkTokens(String op, CudaTensor state, CudaTensor qkv, CudaTensor a, CudaTensor b,
                                   CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor out) {
        checkState(op, state, dims);
        int[] s = qkv.shape();
        if (s.length != 2 || s[1] != dims.convDim()) {
            throw new IllegalArgumentException(op + ": qkv " + qkv + " is not [T, " + dims.convDim() + "]");
        }
        int tokens = s[0];
        long th = (long) tokens * dims.numValueHeads();
        if (a.numel() != th || b.numel() != th) {
            throw new IllegalArgumentException(op + ": a " + a + " and b " + b + " must be [" + tokens + ", "
                    + dims.numValueHeads() + "]");
        }
        if (aLog.numel() != dims.numValueHeads() || dtBias.numel() != dims.numValueHeads()) {
            throw new IllegalArgumentException(op + ": aLog " + aLog + " and dtBias " + dtBias + " must have "
                    + dims.numValueHeads() + " elements");
        }
        if (out.numel() != (long) tokens * dims.valueDim()) {
            throw new IllegalArgumentException(op + ": out " + out + " is not [" + tokens + ", " + dims.valueDim() + "]");
        }
        return tokens;
    }
}
