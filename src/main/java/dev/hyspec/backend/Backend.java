package dev.hyspec.backend;

import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The operations the model layers are written against. Shapes are row-major; {@code T} is the
 * number of tokens in the call. Unless stated, {@code out} may alias an input of the same shape.
 * Every operation computes in float32, whatever dtype a weight is stored in. The CPU backend is
 * the reference every other backend is tested against.
 */
public interface Backend extends AutoCloseable {

    String name();

    /**
     * Marks the start of a forward pass of decode and verify rows only, whose work a backend may
     * record and run as one captured graph, replayed while a step of the same shape recurs (the batched
     * operations read the rows' slots, counts and block tables from device memory, so which requests
     * fill the rows does not matter). Work issued until {@link #endGraph()} may be deferred: a download
     * in between issues it. Backends without graphs ignore both calls.
     */
    default void beginGraph() {}

    /**
     * A point between layers of a step begun with {@link #beginGraph()} where a backend may start the
     * work recorded so far while the rest is recorded (the step then runs as several graphs).
     */
    default void graphBreak() {}

    /** Ends what {@link #beginGraph()} started: the recorded work is issued (as a graph where it can be). */
    default void endGraph() {}

    /**
     * The batch size a decode/verify step of {@code rows} rows is padded to, so that steps of nearby
     * sizes share one captured graph. Backends without graphs pad nothing.
     */
    default int paddedBatchSize(int rows) {
        return rows;
    }

    // ---- memory ----

    /** A float32 tensor of the given shape, filled with zeros. */
    Tensor zeros(int... shape);

    /** A float32 tensor holding a copy of {@code data}. */
    Tensor upload(float[] data, int... shape);

    /** A copy of a tensor's contents as float32 (a weight is widened from its stored dtype). */
    float[] download(Tensor t);

    /** A weight as the checkpoint stores it (F32, BF16 or F16), read in place where possible. */
    Tensor weight(TensorEntry entry);

    /**
     * The rows {@code rows[i]} of a 2-D checkpoint weight, in that order, as one weight
     * {@code [rows.length, cols]}: for projections whose output layout hyspec reorders.
     */
    Tensor weightRows(TensorEntry entry, int[] rows);

    /**
     * A bf16 weight of {@code shape} made where it lives, without a checkpoint: element {@code i}
     * (row-major) is {@code HashUniform.bf16(seed, i, center, scale)}, a deterministic uniform in
     * {@code [center − scale, center + scale)}. For benchmarks of model shapes whose weights are not
     * at hand; the default builds the bytes on the host (the reference), a GPU fills them in place.
     */
    default Tensor randomWeight(long seed, float center, float scale, int... shape) {
        long n = 1;
        for (int d : shape) {
            n *= d;
        }
        ByteBuffer bytes = ByteBuffer.allocateDirect(Math.toIntExact(2 * n)).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            bytes.putShort(2 * i, HashUniform.bf16(seed, i, center, scale));
        }
        return weight(new TensorEntry("random weight", DType.BF16, shape.clone(), bytes));
    }

    /** Releases a tensor; it must not be used afterwards. */
    void free(Tensor t);

    /** {@code dst[dstRow + i, :] = src[srcRow + i, :]} for {@code i < n}; equal column counts. */
    void copyRows(Tensor src, int srcRow, Tensor dst, int dstRow, int n);

    // ---- dense math ----

    /** {@code out[t, :] = table[ids[t], :]}. {@code table [V, D]}, {@code out [T, D]}. */
    void embedding(int[] ids, Tensor table, Tensor out);

    /**
     * {@code out[t, o] = Σ_i x[t, i] · w[o, i]} (+ {@code bias[o]} when bias is not null), i.e.
     * {@code nn.Linear}. {@code x [T, in]}, {@code w [out, in]}, {@code out [T, out]}; out must not alias x.
     */
    void matmul(Tensor x, Tensor w, Tensor bias, Tensor out);

    /**
     * RMSNorm over groups of {@code groupSize} consecutive elements of each row:
     * {@code out = x / sqrt(mean_group(x²) + eps) · w'} with {@code w' = 1 + w} when {@code plusOne}
     * (zero-centred Qwen weights), else {@code w}. {@code w} has {@code groupSize} or {@code cols} elements
     * (indexed by column modulo its length).
     */
    void rmsNorm(Tensor x, Tensor w, int groupSize, float eps, boolean plusOne, Tensor out);

    /**
     * Gated RMSNorm per group of {@code groupSize} columns. {@code gateFirst} (Mamba2):
     * {@code u = x · silu(gate); out = u / sqrt(mean_group(u²) + eps) · w}. Otherwise (Gated DeltaNet):
     * {@code out = x / sqrt(mean_group(x²) + eps) · w · silu(gate)}. {@code w} indexed by column modulo its length.
     */
    void gatedRmsNorm(Tensor x, Tensor gate, Tensor w, int groupSize, float eps, boolean gateFirst, Tensor out);

    /** {@code out = a + b}, elementwise. */
    void add(Tensor a, Tensor b, Tensor out);

    /** {@code out = relu(x)²}. */
    void relu2(Tensor x, Tensor out);

    /** SwiGLU: {@code out = silu(gate) · up}. */
    void siluMul(Tensor gate, Tensor up, Tensor out);

    /**
     * {@code out[t, c] = x[t, c] · σ(gate[t, c'])} with {@code c' = c} when gate has x's shape, or
     * {@code c' = 0} when gate is {@code [T, 1]} (one gate per row).
     */
    void sigmoidGate(Tensor x, Tensor gate, Tensor out);

    /** {@code out[t, :] = x[t, :] · scale[t]}. */
    void scaleRows(Tensor x, float[] scale, Tensor out);

    // ---- attention ----

    /**
     * Rotary embedding in place on {@code x [T, heads·headDim]}: within each head the first
     * {@code rotaryDim} dims are rotated in halves (HF {@code rotate_half}),
     * {@code x' = x·cos + rotate_half(x)·sin} with angle {@code positions[t] · theta^(−2i/rotaryDim)}.
     */
    void rope(Tensor x, int heads, int headDim, int rotaryDim, float theta, int[] positions);

    /**
     * Writes keys and values of {@code T} consecutive positions {@code start … start+T−1} into a paged
     * cache: position {@code p} lives in row {@code blockTable[p / pageSize]·pageSize + p % pageSize} of
     * {@code kPages, vPages [numPages·pageSize, Hkv·D]}. {@code k, v [T, Hkv·D]}.
     */
    void writeKv(Tensor k, Tensor v, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int start);

    /**
     * Causal GQA attention of {@code q [T, H·D]} (positions {@code pastLen … pastLen+T−1}) over a paged
     * cache holding positions {@code 0 … pastLen+T−1} (layout as {@link #writeKv}): query {@code t} sees
     * positions {@code ≤ pastLen + t}; query head {@code h} reads kv head {@code h / (H/Hkv)};
     * {@code out[t, h] = softmax(q·kᵀ / √D) · v}. {@code out [T, H·D]}.
     */
    void pagedAttention(Tensor q, Tensor kPages, Tensor vPages, int[] blockTable, int pageSize, int numHeads,
                        int numKvHeads, int headDim, int pastLen, Tensor out);

    // ---- sampling ----
    //
    // Both take logits [R, V] and return one token id per row, as dev.hyspec.sampling.Sampler picks it.
    // A row must hold valid logits as Sampler requires: no NaN, no +inf, at least one finite value
    // (−inf entries are masked tokens); otherwise IllegalArgumentException.

    /**
     * Greedy picks: per row of {@code logits [R, V]} the first index of the maximum
     * ({@code Sampler.argmax}, ties going to the lowest index).
     */
    int[] argmax(Tensor logits);

    /**
     * One sampled token per row of {@code logits [R, V]}, each row with its own parameters, equal to
     * {@code Sampler.sample(row, new SamplingParams(temperature[r], topP[r], topK[r], …), rng)} when
     * {@code rng.nextDouble()} would return {@code uniform[r]}:
     * <ol>
     *   <li>{@code temperature[r] < SamplingParams.SAMPLING_EPS}: the argmax, as {@link #argmax};</li>
     *   <li>top-k ({@code 0 < topK[r] < V}): keep the logits {@code ≥} the {@code topK}-th largest (ties kept);</li>
     *   <li>{@code p_i = (float) exp((l_i − max) / temperature)} over the kept, normalised in double;</li>
     *   <li>top-p ({@code topP[r] < 1}): in order of probability descending (ties by lower index), keep a
     *       token iff the mass before it is {@code < topP · Σp}; renormalise;</li>
     *   <li>inverse CDF: the first index {@code i} in index order with {@code uniform[r] · Σw < Σ_{j≤i} w_j}.</li>
     * </ol>
     * Parameters as {@code SamplingParams.validate} allows them: temperature finite and {@code ≥ 0},
     * {@code topP ∈ (0, 1]}, {@code topK ≥ −1} ({@code ≤ 0} disables); {@code uniform ∈ [0, 1)}, one
     * {@code RandomSource.nextDouble()} draw per row. Doubles throughout, as Sampler takes them, so the
     * pick is Sampler's for the same draw. A backend that sums in another order than Sampler's (a GPU)
     * may differ where a draw or the top-p mass falls within double rounding of a token boundary.
     */
    int[] sample(Tensor logits, double[] temperature, int[] topK, double[] topP, double[] uniform);

    // ---- recurrent layers ----
    //
    // A recurrent state is one matrix per head. StateLayout.KV stores it [key, value] (value
    // contiguous), StateLayout.VK [value, key]. Mamba2: key = N, value = P, so KV is [H, N, P] and VK is
    // [H, P, N]. Gated DeltaNet: key = Dk, value = Dv, so KV is [Hv, Dk, Dv] and VK is [Hv, Dv, Dk].
    // Every state operation takes the layout its state tensor is in and must give the same numbers
    // for both.
    //
    // Replay history (see DESIGN §4 I4), one row per token of a step:
    //   Mamba2:        [x (H·P) | B (G·N) | dt (H) | c (H)], dt after softplus and clamp,
    //                  c_t = Σ_{i≤t} A·dt_i with A = −exp(aLog) (the running sum within the step)
    //   Gated DeltaNet: [k (Hk·Dk) | v (Hv·Dv) | g (Hv) | β (Hv)], k L2-normalised (unscaled),
    //                  g = −exp(aLog)·softplus(a + dtBias), β = σ(b)

    /**
     * Causal depthwise conv with SiLU, continuing from a window of the previous {@code W−1} inputs:
     * with {@code u = [window | x]} (time along the window), {@code out[t, c] =
     * silu(bias[c] + Σ_j w[c, j] · u[c, t + j])}; afterwards {@code window} holds the last {@code W−1}
     * inputs when {@code advance}, else it is left unchanged. {@code x, out [T, C]},
     * {@code window [C, W−1]}, {@code w [C, W]} (or {@code [C, 1, W]}), {@code bias [C]} or null.
     * out must not alias x.
     */
    void causalConv1d(Tensor x, Tensor window, Tensor w, Tensor bias, Tensor out, boolean advance);

    /**
     * Moves a conv window forward over the first {@code count} rows of {@code x [≥count, C]}:
     * {@code window [C, W−1]} becomes the last {@code W−1} columns of {@code [window | x[0..count)ᵀ]}.
     */
    void shiftWindow(Tensor window, Tensor x, int count);

    /**
     * Mamba2 selective-state recurrence over {@code T} tokens, from {@code state} (updated in place).
     * From {@code xBC [T, H·P + 2·G·N]} = {@code x | B | C}:
     * {@code dt = clamp(softplus(dtRaw + dtBias), dtMin, dtMax)}, {@code A = −exp(aLog)},
     * {@code h_t = exp(dt·A)·h_{t−1} + dt·x_t ⊗ B_t}, {@code y_t = h_t·C_t + D·x_t}.
     * {@code dtRaw [T, H]}, {@code dtBias, aLog, d [H]}, {@code y [T, H·P]}.
     */
    void mamba2Scan(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias, Tensor aLog,
                    Tensor d, Mamba2Dims dims, Tensor y);

    /**
     * As {@link #mamba2Scan}, but {@code state} is only read: the state after token {@code t} is
     * written to {@code states[t]} (same shape and layout), for {@code t < T}.
     */
    void mamba2ScanStates(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                          Tensor aLog, Tensor d, Mamba2Dims dims, Tensor[] states, Tensor y);

    /**
     * Advances {@code state} over the first {@code count} rows of a Mamba2 replay history in one
     * rank-{@code count} update: {@code S ← e^{c_{count−1}}·S + Σ_{j<count} e^{c_{count−1}−c_j}·dt_j·x_j⊗B_j}.
     * {@code count = 0} leaves it unchanged.
     */
    void mamba2Replay(Tensor state, StateLayout layout, Tensor history, int count, Mamba2Dims dims);

    /**
     * The outputs of {@code T} tokens straight from {@code state} = S(L), which is only read:
     * {@code y_t = e^{c_t}·(C_t·S) + Σ_{j≤t} (C_t·B_j)·e^{c_t−c_j}·dt_j·x_j + D·x_t} (equal to what
     * {@link #mamba2Scan} would output), and writes the tokens' replay history rows {@code 0 … T−1}
     * to {@code history [≥T, H·P + G·N + 2H]}.
     */
    void mamba2ReplayOutputs(Tensor state, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                             Tensor aLog, Tensor d, Mamba2Dims dims, Tensor history, Tensor y);

    /**
     * Gated delta rule over {@code T} tokens from {@code state} (updated in place).
     * From {@code qkv [T, 2·Hk·Dk + Hv·Dv]} = {@code q | k | v}: q and k are L2-normalised per head
     * ({@code x / sqrt(Σx² + 1e−6)}), q scaled by {@code Dk^−½}; {@code β = σ(b)},
     * {@code g = −exp(aLog)·softplus(a + dtBias)}; per token
     * {@code S ← S·e^g; δ = β(v − Sᵀk); S ← S + k δᵀ; o = Sᵀq}. {@code a, b [T, Hv]}, {@code out [T, Hv·Dv]}.
     */
    void gatedDeltaScan(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                        Tensor dtBias, GdnDims dims, Tensor out);

    /**
     * As {@link #gatedDeltaScan}, but {@code state} is only read: the state after token {@code t} is
     * written to {@code states[t]}, for {@code t < T}.
     */
    void gatedDeltaScanStates(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                              Tensor dtBias, GdnDims dims, Tensor[] states, Tensor out);

    /** Advances {@code state} over the first {@code count} rows of a Gated DeltaNet replay history, in order. */
    void gatedDeltaReplay(Tensor state, StateLayout layout, Tensor history, int count, GdnDims dims);

    /**
     * The outputs of {@code T} tokens from {@code state} = S(L) without writing it (a kernel keeps the
     * running state in registers; the CPU uses a private copy), equal to what {@link #gatedDeltaScan}
     * would output, and the tokens' replay history rows {@code 0 … T−1} written to
     * {@code history [≥T, Hk·Dk + Hv·Dv + 2·Hv]}.
     */
    void gatedDeltaReplayOutputs(Tensor state, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                                 Tensor dtBias, GdnDims dims, Tensor history, Tensor out);

    /** Converts a state {@code [heads, rows, cols]} in place to {@code [heads, cols, rows]} (KV ⇄ VK). */
    void transposeState(Tensor state, int heads, int rows, int cols);

    /** {@code dst = src} (equal element counts). */
    void copy(Tensor src, Tensor dst);

    /** Fills a tensor with zeros. */
    void zero(Tensor t);

    // ---- batched generate rows ----
    //
    // R rows of T tokens each ("tokensPerRow"), stacked row after row in the token inputs and outputs
    // ([R·T, ·]): row r owns token rows r·T … r·T+T−1. Per-row tensors (states, windows, histories)
    // come as arrays indexed by row; a row may point at a reserved padding slot (DESIGN I6). Each
    // operation equals its per-row counterpart applied to every row in turn (the defaults do exactly
    // that); a GPU runs one launch for all rows, reading the per-row addresses and counts from device
    // memory, so a captured step replays for any rows of the same shape.

    /** {@code dst[r]} rows {@code 0 … T−1} = {@code src} rows {@code r·T … r·T+T−1}. */
    default void scatterRowBlocks(Tensor src, int tokensPerRow, Tensor[] dst) {
        for (int r = 0; r < dst.length; r++) {
            copyRows(src, r * tokensPerRow, dst[r], 0, tokensPerRow);
        }
    }

    /** {@code dst[i] = src[i]} for every pair (equal element counts per pair). */
    default void copyBatch(Tensor[] src, Tensor[] dst) {
        for (int i = 0; i < src.length; i++) {
            copy(src[i], dst[i]);
        }
    }

    /** {@link #causalConv1d} of every row: row r's tokens continue {@code windows[r]}. */
    default void causalConv1dBatch(Tensor x, Tensor[] windows, Tensor w, Tensor bias, int tokensPerRow, Tensor out,
                                   boolean advance) {
        for (int r = 0; r < windows.length; r++) {
            Tensor xr = rowBlock(x, r, tokensPerRow);
            Tensor or = zeros(tokensPerRow, out.cols());
            causalConv1d(xr, windows[r], w, bias, or, advance);
            copyRows(or, 0, out, r * tokensPerRow, tokensPerRow);
            free(xr);
            free(or);
        }
    }

    /** {@link #shiftWindow}{@code (windows[r], xs[r], counts[r])} for every row ({@code counts[r] = 0}: unchanged). */
    default void shiftWindowBatch(Tensor[] windows, Tensor[] xs, int[] counts) {
        for (int r = 0; r < windows.length; r++) {
            if (counts[r] > 0) {
                shiftWindow(windows[r], xs[r], counts[r]);
            }
        }
    }

    /**
     * The conv of a replay verify for every row, as one operation where a backend fuses it:
     * {@code windows[r]} first moves past the first {@code counts[r]} rows of {@code previous[r]}
     * ({@link #shiftWindowBatch}), this step's rows of {@code x} go to {@code next[r]}
     * ({@link #scatterRowBlocks}), then {@link #causalConv1dBatch} over the moved windows (not advanced).
     */
    default void convStepBatch(Tensor x, Tensor[] windows, Tensor[] previous, int[] counts, Tensor[] next, Tensor w,
                               Tensor bias, int tokensPerRow, Tensor out) {
        shiftWindowBatch(windows, previous, counts);
        scatterRowBlocks(x, tokensPerRow, next);
        causalConv1dBatch(x, windows, w, bias, tokensPerRow, out, false);
    }

    /** {@link #mamba2Scan} of every row, {@code states[r]} updated in place (plain decode). */
    default void mamba2ScanBatch(Tensor[] states, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                 Tensor aLog, Tensor d, Mamba2Dims dims, int tokensPerRow, Tensor y) {
        for (int r = 0; r < states.length; r++) {
            Tensor[] in = rowBlocks(r, tokensPerRow, xBC, dtRaw);
            Tensor yr = zeros(tokensPerRow, y.cols());
            mamba2Scan(states[r], layout, in[0], in[1], dtBias, aLog, d, dims, yr);
            putRowBlock(yr, y, r, tokensPerRow, in);
        }
    }

    /**
     * {@link #mamba2ScanStates} of every row (intermediate-copy verify): {@code states[r]} only read,
     * the state after token t written to {@code scratch[r][t]}.
     */
    default void mamba2ScanStatesBatch(Tensor[] states, StateLayout layout, Tensor xBC, Tensor dtRaw, Tensor dtBias,
                                       Tensor aLog, Tensor d, Mamba2Dims dims, Tensor[][] scratch, int tokensPerRow,
                                       Tensor y) {
        for (int r = 0; r < states.length; r++) {
            Tensor[] in = rowBlocks(r, tokensPerRow, xBC, dtRaw);
            Tensor yr = zeros(tokensPerRow, y.cols());
            mamba2ScanStates(states[r], layout, in[0], in[1], dtBias, aLog, d, dims, scratch[r], yr);
            putRowBlock(yr, y, r, tokensPerRow, in);
        }
    }

    /**
     * The replay verify of every row (DESIGN I4, steps 1–3) in one pass: {@code states[r]} advanced
     * over the first {@code counts[r]} rows of {@code previous[r]} ({@link #mamba2Replay}, written back),
     * then the row's outputs from that state and its history rows written to {@code next[r]}
     * ({@link #mamba2ReplayOutputs}). A kernel keeps the replayed state on chip between the two, so
     * the state is read and written once.
     */
    default void mamba2ReplayVerifyBatch(Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts,
                                         Tensor xBC, Tensor dtRaw, Tensor dtBias, Tensor aLog, Tensor d,
                                         Mamba2Dims dims, Tensor[] next, int tokensPerRow, Tensor y) {
        for (int r = 0; r < states.length; r++) {
            if (counts[r] > 0) {
                mamba2Replay(states[r], layout, previous[r], counts[r], dims);
            }
            Tensor[] in = rowBlocks(r, tokensPerRow, xBC, dtRaw);
            Tensor yr = zeros(tokensPerRow, y.cols());
            mamba2ReplayOutputs(states[r], layout, in[0], in[1], dtBias, aLog, d, dims, next[r], yr);
            putRowBlock(yr, y, r, tokensPerRow, in);
        }
    }

    /** {@link #gatedDeltaScan} of every row, {@code states[r]} updated in place (plain decode). */
    default void gatedDeltaScanBatch(Tensor[] states, StateLayout layout, Tensor qkv, Tensor a, Tensor b, Tensor aLog,
                                     Tensor dtBias, GdnDims dims, int tokensPerRow, Tensor out) {
        for (int r = 0; r < states.length; r++) {
            Tensor[] in = rowBlocks(r, tokensPerRow, qkv, a, b);
            Tensor or = zeros(tokensPerRow, out.cols());
            gatedDeltaScan(states[r], layout, in[0], in[1], in[2], aLog, dtBias, dims, or);
            putRowBlock(or, out, r, tokensPerRow, in);
        }
    }

    /** {@link #gatedDeltaScanStates} of every row, the state after token t written to {@code scratch[r][t]}. */
    default void gatedDeltaScanStatesBatch(Tensor[] states, StateLayout layout, Tensor qkv, Tensor a, Tensor b,
                                           Tensor aLog, Tensor dtBias, GdnDims dims, Tensor[][] scratch,
                                           int tokensPerRow, Tensor out) {
        for (int r = 0; r < states.length; r++) {
            Tensor[] in = rowBlocks(r, tokensPerRow, qkv, a, b);
            Tensor or = zeros(tokensPerRow, out.cols());
            gatedDeltaScanStates(states[r], layout, in[0], in[1], in[2], aLog, dtBias, dims, scratch[r], or);
            putRowBlock(or, out, r, tokensPerRow, in);
        }
    }

    /** As {@link #mamba2ReplayVerifyBatch}, for Gated DeltaNet ({@link #gatedDeltaReplay}, then
     * {@link #gatedDeltaReplayOutputs}). */
    default void gatedDeltaReplayVerifyBatch(Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts,
                                             Tensor qkv, Tensor a, Tensor b, Tensor aLog, Tensor dtBias, GdnDims dims,
                                             Tensor[] next, int tokensPerRow, Tensor out) {
        for (int r = 0; r < states.length; r++) {
            if (counts[r] > 0) {
                gatedDeltaReplay(states[r], layout, previous[r], counts[r], dims);
            }
            Tensor[] in = rowBlocks(r, tokensPerRow, qkv, a, b);
            Tensor or = zeros(tokensPerRow, out.cols());
            gatedDeltaReplayOutputs(states[r], layout, in[0], in[1], in[2], aLog, dtBias, dims, next[r], or);
            putRowBlock(or, out, r, tokensPerRow, in);
        }
    }

    /**
     * {@link #writeKv} of every row: row r's tokens {@code t < lengths[r]} go to positions
     * {@code starts[r] + t} of its pages {@code blockTables[r]}; tokens past {@code lengths[r]}
     * (padding) are not written.
     */
    default void writeKvBatch(Tensor k, Tensor v, Tensor kPages, Tensor vPages, int[][] blockTables, int pageSize,
                              int[] starts, int[] lengths, int tokensPerRow) {
        for (int r = 0; r < blockTables.length; r++) {
            if (lengths[r] == 0) {
                continue;
            }
            Tensor[] in = rowBlocks(r, tokensPerRow, k, v);
            Tensor kr = zeros(lengths[r], k.cols());
            Tensor vr = zeros(lengths[r], v.cols());
            copyRows(in[0], 0, kr, 0, lengths[r]);
            copyRows(in[1], 0, vr, 0, lengths[r]);
            writeKv(kr, vr, kPages, vPages, blockTables[r], pageSize, starts[r]);
            for (Tensor t : new Tensor[] {in[0], in[1], kr, vr}) {
                free(t);
            }
        }
    }

    /**
     * {@link #pagedAttention} of every row: row r's queries {@code t < lengths[r]} at positions
     * {@code starts[r] + t}; the output rows of padding tokens ({@code t ≥ lengths[r]}) are zero.
     */
    default void pagedAttentionBatch(Tensor q, Tensor kPages, Tensor vPages, int[][] blockTables, int pageSize,
                                     int numHeads, int numKvHeads, int headDim, int[] starts, int[] lengths,
                                     int tokensPerRow, Tensor out) {
        for (int r = 0; r < blockTables.length; r++) {
            Tensor zero = zeros(tokensPerRow, out.cols());
            copyRows(zero, 0, out, r * tokensPerRow, tokensPerRow);
            free(zero);
            if (lengths[r] == 0) {
                continue;
            }
            Tensor qr = zeros(lengths[r], q.cols());
            copyRows(q, r * tokensPerRow, qr, 0, lengths[r]);
            Tensor or = zeros(lengths[r], out.cols());
            pagedAttention(qr, kPages, vPages, blockTables[r], pageSize, numHeads, numKvHeads, headDim, starts[r], or);
            copyRows(or, 0, out, r * tokensPerRow, lengths[r]);
            free(qr);
            free(or);
        }
    }

    private Tensor rowBlock(Tensor t, int row, int tokensPerRow) {
        Tensor s = zeros(tokensPerRow, t.cols());
        copyRows(t, row * tokensPerRow, s, 0, tokensPerRow);
        return s;
    }

    private Tensor[] rowBlocks(int row, int tokensPerRow, Tensor... ts) {
        Tensor[] out = new Tensor[ts.length];
        for (int i = 0; i < ts.length; i++) {
            out[i] = rowBlock(ts[i], row, tokensPerRow);
        }
        return out;
    }

    /** Copies a row's output block into the stacked output and frees it with the row's inputs. */
    private void putRowBlock(Tensor rowOut, Tensor out, int row, int tokensPerRow, Tensor[] inputs) {
        copyRows(rowOut, 0, out, row * tokensPerRow, tokensPerRow);
        free(rowOut);
        for (Tensor t : inputs) {
            free(t);
        }
    }

    // ---- fused decode-step ops ----
    //
    // Each equals the plain ops it names, in that order (the defaults do exactly that); a GPU runs it
    // as fewer launches, which is what a batch-1 decode step, bound by per-launch costs beside its
    // weight reads, needs.

    /**
     * A float32 tensor whose contents are unspecified: for outputs that the next op overwrites
     * entirely (the default zeroes it, as {@link #zeros}).
     */
    default Tensor empty(int... shape) {
        return zeros(shape);
    }

    /** {@code x ← x + y}, then {@code out = rmsNorm(x)} ({@link #add}, {@link #rmsNorm}). */
    default void addRmsNorm(Tensor x, Tensor y, Tensor w, int groupSize, float eps, boolean plusOne, Tensor out) {
        add(x, y, x);
        rmsNorm(x, w, groupSize, eps, plusOne, out);
    }

    /** {@code out = relu(x · wᵀ + bias)²} ({@link #matmul}, {@link #relu2}). */
    default void matmulRelu2(Tensor x, Tensor w, Tensor bias, Tensor out) {
        matmul(x, w, bias, out);
        relu2(out, out);
    }

    /**
     * {@code out[i] = x · w[i]ᵀ + bias[i]} for every product i of one input (a layer's input
     * projections); {@code bias} may be null, or hold nulls.
     */
    default void matmuls(Tensor x, Tensor[] w, Tensor[] bias, Tensor[] out) {
        for (int i = 0; i < w.length; i++) {
            matmul(x, w[i], bias == null ? null : bias[i], out[i]);
        }
    }

    // ---- mixture of experts ----

    /** {@code dst[i, :] = src[rows[i], :]}. */
    void gatherRows(Tensor src, int[] rows, Tensor dst);

    /** {@code dst[rows[i], :] += scale[i] · src[i, :]}. */
    void scatterAddRows(Tensor src, int[] rows, float[] scale, Tensor dst);

    // ---- mixture of experts without host round trips ----
    //
    // A MoE layer's routing and expert products kept on the backend, so a decode or verify step
    // needs no download and can run as a captured graph: routing writes the experts of every token
    // as tensors, the products and the combine read them there. The defaults route on the host
    // (MoeRouting.route, the reference) and run each expert on the pairs routed to it.
    //
    // Expert ids travel in float32 tensors (every activation here is float32): id e is stored as the
    // float value e, exact for e < 2^24.

    /** The experts' weights of one projection as {@link #moeExpertMatmul} takes them; called once, at load. */
    default ExpertWeights expertWeights(Tensor[] weights) {
        return new ExpertWeights(weights);
    }

    /**
     * Routes {@code T} tokens as {@link MoeRouting#route}: {@code logits [T, E]} → {@code ids [T, K]}
     * (expert ids as float values) and {@code weights [T, K]}, each token's experts best first.
     */
    default void moeRoute(Tensor logits, MoeRouting routing, Tensor ids, Tensor weights) {
        int pairs = Math.toIntExact(ids.numel());
        if (ids.cols() != routing.topK() || weights.numel() != pairs || logits.rows() * routing.topK() != pairs) {
            throw new IllegalArgumentException("moeRoute: logits " + java.util.Arrays.toString(logits.shape())
                    + ", ids " + java.util.Arrays.toString(ids.shape()) + " for top-" + routing.topK());
        }
        float[] bias = routing.scoreBias() == null ? null : download(routing.scoreBias());
        int[] chosen = new int[pairs];
        float[] w = new float[pairs];
        routing.route(download(logits), logits.cols(), bias, chosen, w);
        float[] asFloats = new float[pairs];
        for (int i = 0; i < pairs; i++) {
            asFloats[i] = chosen[i];
        }
        Tensor hostIds = upload(asFloats, ids.shape());
        Tensor hostWeights = upload(w, weights.shape());
        copy(hostIds, ids);
        copy(hostWeights, weights);
        free(hostIds);
        free(hostWeights);
    }

    /**
     * The routed experts' products: {@code out[t·K + k, :] = x[row, :] · experts.weight(ids[t, k])ᵀ}
     * for every pair {@code (t, k)}, with {@code row = t} when {@code x} has {@code T} rows (the
     * up/gate projections: a token feeds its K experts) and {@code row = t·K + k} when it has
     * {@code T·K} rows (the down projection: one input per pair). {@code ids [T, K]} as
     * {@link #moeRoute} writes them, {@code x [T or T·K, D]}, {@code out [T·K, N]}.
     */
    default void moeExpertMatmul(Tensor x, Tensor ids, ExpertWeights experts, Tensor out) {
        int pairs = Math.toIntExact(ids.numel());
        int k = ids.cols();
        boolean perPair = x.rows() == pairs;
        if ((!perPair && x.rows() * k != pairs) || x.cols() != experts.cols() || out.rows() != pairs
                || out.cols() != experts.rows()) {
            throw new IllegalArgumentException("moeExpertMatmul: x " + java.util.Arrays.toString(x.shape()) + ", ids "
                    + java.util.Arrays.toString(ids.shape()) + ", experts [" + experts.rows() + ", " + experts.cols()
                    + "], out " + java.util.Arrays.toString(out.shape()));
        }
        float[] id = download(ids);
        for (int e = 0; e < experts.numExperts(); e++) {
            int[] routed = pairsOf(id, e);
            if (routed.length == 0) {
                continue;
            }
            int[] rows = new int[routed.length];
            for (int i = 0; i < routed.length; i++) {
                rows[i] = perPair ? routed[i] : routed[i] / k;
            }
            Tensor xe = zeros(routed.length, x.cols());
            gatherRows(x, rows, xe);
            Tensor ye = zeros(routed.length, out.cols());
            matmul(xe, experts.weight(e), null, ye);
            for (int i = 0; i < routed.length; i++) {
                copyRows(ye, i, out, routed[i], 1);
            }
            free(xe);
            free(ye);
        }
    }

    /**
     * {@code out[t, :] = Σ_k weights[t, k] · y[t·K + k, :]}, added in ascending expert id (the order
     * in which the per-expert path adds its experts). {@code y [T·K, D]}, {@code ids, weights [T, K]},
     * {@code out [T, D]} (overwritten).
     */
    default void moeCombine(Tensor y, Tensor ids, Tensor weights, Tensor out) {
        int pairs = Math.toIntExact(ids.numel());
        int k = ids.cols();
        if (y.rows() != pairs || weights.numel() != pairs || out.rows() * k != pairs || out.cols() != y.cols()) {
            throw new IllegalArgumentException("moeCombine: y " + java.util.Arrays.toString(y.shape()) + ", ids "
                    + java.util.Arrays.toString(ids.shape()) + ", out " + java.util.Arrays.toString(out.shape()));
        }
        float[] id = download(ids);
        float[] w = download(weights);
        zero(out);
        int experts = 0;
        for (float e : id) {
            experts = Math.max(experts, (int) e + 1);
        }
        for (int e = 0; e < experts; e++) {
            int[] routed = pairsOf(id, e);
            if (routed.length == 0) {
                continue;
            }
            int[] tokens = new int[routed.length];
            float[] scale = new float[routed.length];
            for (int i = 0; i < routed.length; i++) {
                tokens[i] = routed[i] / k;
                scale[i] = w[routed[i]];
            }
            Tensor ye = zeros(routed.length, y.cols());
            gatherRows(y, routed, ye);
            scatterAddRows(ye, tokens, scale, out);
            free(ye);
        }
    }

    /** The pairs {@code t·K + k} routed to expert {@code e}, in order. */
    private static int[] pairsOf(float[] ids, int e) {
        return java.util.stream.IntStream.range(0, ids.length).filter(i -> ids[i] == e).toArray();
    }

    @Override
    void close();
}
