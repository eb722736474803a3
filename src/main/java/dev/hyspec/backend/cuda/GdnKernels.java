package dev.hyspec.backend.cuda;

import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.StateLayout;
import java.util.Arrays;

/**
 * The Gated DeltaNet scans, replay and replay outputs ({@code gdn.cu}). One kernel per operation,
 * layout and rows per lane: a block owns a tile of value columns of one value head and keeps them
 * in registers over all tokens of the call (KV: 512 threads, 16 columns; VK: 128 threads, 4
 * columns, one warp per column), so the state is read once and, where the operation updates it,
 * written once. The weights {@code aLog} and {@code dtBias} may each be F32, BF16 or F16 (passed as
 * a dtype code the kernel switches on).
 */
final class GdnKernels {
    /** States written per launch of the scan-states kernel (its pointer arguments). */
    static final int STATES_PER_LAUNCH = 8;
    /** The largest key head dim the kernels hold in registers (8 rows per lane). */
    static final int MAX_KEY_HEAD_DIM = 256;

    private final CudaRuntime rt;

    GdnKernels(CudaRuntime rt) {
        this.rt = rt;
    }

    void scan(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b, CudaTensor aLog,
              CudaTensor dtBias, GdnDims dims, CudaTensor out) {
        int tokens = checkTokens("gatedDeltaScan", state, qkv, a, b, aLog, dtBias, dims, out);
        if (tokens == 0) {
            return;
        }
        CudaTensor[] none = new CudaTensor[0];
        launch("scan", layout, dims, tokens, state, qkv, a, b, aLog, dtBias, out, state, none);
    }

    void scanStates(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                    CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor[] states, CudaTensor out) {
        int tokens = checkTokens("gatedDeltaScanStates", state, qkv, a, b, aLog, dtBias, dims, out);
        if (states.length != tokens) {
            throw new IllegalArgumentException("gatedDeltaScanStates: " + states.length + " states for " + tokens
                    + " tokens");
        }
        for (CudaTensor s : states) {
            if (s.numel() != state.numel()) {
                throw new IllegalArgumentException("gatedDeltaScanStates: state " + s + " is not the shape of " + state);
            }
        }
        int conv = dims.convDim();
        int hv = dims.numValueHeads();
        int valueDim = dims.valueDim();
        // Chunks of STATES_PER_LAUNCH tokens; chunk c starts from the state chunk c−1 wrote last.
        for (int t0 = 0; t0 < tokens; t0 += STATES_PER_LAUNCH) {
            int n = Math.min(STATES_PER_LAUNCH, tokens - t0);
            CudaTensor from = t0 == 0 ? state : states[t0 - 1];
            CudaTensor[] chunk = Arrays.copyOfRange(states, t0, t0 + n);
            launchAt("states", layout, dims, n, from.ptr(), qkv.at((long) t0 * conv), a.at((long) t0 * hv),
                    b.at((long) t0 * hv), aLog, dtBias, out.at((long) t0 * valueDim), from.ptr(), chunk);
        }
    }

    void replay(CudaTensor state, StateLayout layout, CudaTensor history, int count, GdnDims dims) {
        checkState("gatedDeltaReplay", state, dims);
        checkHistory("gatedDeltaReplay", history, dims, count);
        if (count == 0) {
            return;
        }
        CudaTensor[] none = new CudaTensor[0];
        launch("replay", layout, dims, count, state, state, state, state, state, state, state, history, none);
    }

    void replayOutputs(CudaTensor state, StateLayout layout, CudaTensor qkv, CudaTensor a, CudaTensor b,
                       CudaTensor aLog, CudaTensor dtBias, GdnDims dims, CudaTensor history, CudaTensor out) {
        int tokens = checkTokens("gatedDeltaReplayOutputs", state, qkv, a, b, aLog, dtBias, dims, out);
        checkHistory("gatedDeltaReplayOutputs", history, dims, tokens);
        if (tokens == 0) {
            return;
        }
        CudaTensor[] none = new CudaTensor[0];
        launch("replay_out", layout, dims, tokens, state, qkv, a, b, aLog, dtBias, out, history, none);
    }

    private void launch(String op, StateLayout layout, GdnDims dims, int tokens, CudaTensor state, CudaTensor qkv,
                        CudaTensor a, CudaTensor b, CudaTensor aLog, CudaTensor dtBias, CudaTensor out,
                        CudaTensor hist, CudaTensor[] states) {
        launchAt(op, layout, dims, tokens, state.ptr(), qkv.ptr(), a.ptr(), b.ptr(), aLog, dtBias, out.ptr(),
                hist.ptr(), states);
    }

    /**
     * Launches {@code gdn_OP_LAYOUT_rR}. Pointers the operation does not use are passed as valid
     * addresses it never reads; {@code states} fills the {@value #STATES_PER_LAUNCH} state pointers.
     */
    private void launchAt(String op, StateLayout layout, GdnDims dims, int tokens, Object state, Object qkv, Object a,
                          Object b, CudaTensor aLog, CudaTensor dtBias, Object out, Object hist, CudaTensor[] states) {
        int dk = dims.keyHeadDim();
        int rows = rowsPerLane(dk);
        boolean kv = layout == StateLayout.KV;
        int columns = kv ? 16 : 4;
        int threads = kv ? 512 : 128;
        String kernel = "gdn_" + op + "_" + (kv ? "kv" : "vk") + "_r" + rows;
        Object[] args = new Object[18 + 6];
        args[0] = state;
        args[1] = qkv;
        args[2] = a;
        args[3] = b;
        args[4] = aLog == null ? state : aLog;
        args[5] = aLog == null ? 0 : dtypeCode(aLog);
        args[6] = dtBias == null ? state : dtBias;
        args[7] = dtBias == null ? 0 : dtypeCode(dtBias);
        args[8] = out;
        args[9] = hist;
        for (int i = 0; i < STATES_PER_LAUNCH; i++) {
            args[10 + i] = states.length == 0 ? state : states[Math.min(i, states.length - 1)].ptr();
        }
        args[18] = tokens;
        args[19] = dims.numKeyHeads();
        args[20] = dims.numValueHeads();
        args[21] = dk;
        args[22] = dims.valueHeadDim();
        args[23] = (float) (1.0 / Math.sqrt(dk));
        rt.launch(kernel, (dims.valueHeadDim() + columns - 1) / columns, dims.numValueHeads(), 1, threads, 0, args);
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
                || dims.numValueHeads() % dims.numKeyHeads() != 0) {
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
