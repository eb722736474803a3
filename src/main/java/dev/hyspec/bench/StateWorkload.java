package dev.hyspec.bench;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.GdnDims;
import dev.hyspec.backend.Mamba2Dims;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import java.util.Arrays;

/**
 * One recurrent architecture's state update at one layer shape, as {@link StateUpdateBench} drives
 * it: the shapes of the state, the replay history and the per-token inputs, and the batched
 * {@link Backend} operations of a verify or decode step over R rows of T tokens (DESIGN §4):
 * <ul>
 *   <li>{@link Op#REPLAY}: advance each row's state over the previous step's accepted tokens, write
 *       it back, output the T new tokens from it and store their history (I4);</li>
 *   <li>{@link Op#INTERMEDIATE_COPY}: write the state after every token to T scratch slots, then
 *       commit the last one into the row's slot (I3);</li>
 *   <li>{@link Op#DECODE}: the plain scan, state updated in place.</li>
 * </ul>
 */
abstract class StateWorkload {
    enum Op {
        REPLAY("replay"),
        INTERMEDIATE_COPY("intermediate-copy"),
        DECODE("decode");

        final String label;

        Op(String label) {
            this.label = label;
        }
    }

    /** Nemotron-H-8B's Mamba2 layer: H=128, P=64, N=128, G=8; dt clamped from below at time_step_min. */
    static final StateWorkload MAMBA2_8B = new Mamba2(new Mamba2Dims(128, 64, 128, 8, 0.001f,
            Float.POSITIVE_INFINITY));
    /** Qwen3.5's Gated DeltaNet layer: Hk=16, Hv=32, Dk=Dv=128. */
    static final StateWorkload GDN_QWEN35 = new Gdn(new GdnDims(16, 32, 128, 128));

    /** "mamba2" or "gdn", as the JSON names it. */
    abstract String arch();

    /** The shape of one row's state in {@code layout}. */
    abstract int[] stateShape(StateLayout layout);

    /** Columns of one replay-history row. */
    abstract int historyWidth();

    /** Columns of the per-token inputs, in the order the operations take them. */
    abstract int[] inputColumns();

    /** Columns of the per-token output. */
    abstract int outputColumns();

    /** Heads the per-head parameters span (each parameter is {@code [heads]}). */
    abstract int paramHeads();

    /** How many per-head parameters the operations take. */
    abstract int paramCount();

    abstract void scanBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] in, Tensor[] params, int tokens,
                            Tensor out);

    abstract void scanStatesBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] in, Tensor[] params,
                                  Tensor[][] scratch, int tokens, Tensor out);

    abstract void replayVerifyBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts,
                                    Tensor[] in, Tensor[] params, Tensor[] next, int tokens, Tensor out);

    /** Elements of one row's state, {@code |S|} / 4. */
    final long stateElements() {
        long n = 1;
        for (int d : stateShape(StateLayout.KV)) {
            n *= d;
        }
        return n;
    }

    /**
     * The bytes {@code op} must move at least, for {@code batch} rows of {@code tokens} tokens:
     * the state traffic of DESIGN I3/I4 ({@code 2·|S|} for replay and decode, {@code (1+T)·|S| + 2·|S|}
     * for intermediate-copy) plus the per-token inputs and outputs, and for replay the history rows
     * read and written.
     */
    final long floorBytes(Op op, int tokens, int batch) {
        long state = 4 * stateElements();
        long tokenColumns = outputColumns();
        for (int c : inputColumns()) {
            tokenColumns += c;
        }
        long tokenBytes = 4L * batch * tokens * tokenColumns;
        long historyBytes = 4L * batch * tokens * historyWidth();
        return switch (op) {
            case REPLAY -> 2 * state * batch + tokenBytes + 2 * historyBytes;
            case INTERMEDIATE_COPY -> (1 + tokens) * state * batch + 2 * state * batch + tokenBytes;
            case DECODE -> 2 * state * batch + tokenBytes;
        };
    }

    /** Runs {@code op} on {@code rows}, whose inputs are set for {@code rows.tokens()} tokens. */
    final void run(Op op, StateRows rows, Tensor[] params) {
        Backend b = rows.backend();
        int t = rows.tokens();
        switch (op) {
            case REPLAY -> replayVerifyBatch(b, rows.states(), rows.layout(), rows.previous(), rows.counts(),
                    rows.inputs(), params, rows.next(), t, rows.out());
            case INTERMEDIATE_COPY -> {
                scanStatesBatch(b, rows.states(), rows.layout(), rows.inputs(), params, rows.scratch(), t, rows.out());
                b.copyBatch(rows.lastScratch(), rows.states());
            }
            case DECODE -> scanBatch(b, rows.states(), rows.layout(), rows.inputs(), params, t, rows.out());
        }
    }

    /** Writes the history of the rows' current inputs into their previous-step buffers (a replay with counts 0). */
    final void primeHistory(StateRows rows, Tensor[] params) {
        replayVerifyBatch(rows.backend(), rows.states(), rows.layout(), rows.next(), new int[rows.batch()],
                rows.inputs(), params, rows.previous(), rows.tokens(), rows.out());
    }

    private static final class Mamba2 extends StateWorkload {
        private final Mamba2Dims dims;

        Mamba2(Mamba2Dims dims) {
            this.dims = dims;
        }

        @Override
        String arch() {
            return "mamba2";
        }

        @Override
        int[] stateShape(StateLayout layout) {
            int h = dims.numHeads();
            return layout == StateLayout.VK ? new int[] {h, dims.headDim(), dims.stateSize()}
                    : new int[] {h, dims.stateSize(), dims.headDim()};
        }

        @Override
        int historyWidth() {
            return dims.innerSize() + dims.nGroups() * dims.stateSize() + 2 * dims.numHeads();
        }

        @Override
        int[] inputColumns() {
            return new int[] {dims.convDim(), dims.numHeads()};   // xBC, dtRaw
        }

        @Override
        int outputColumns() {
            return dims.innerSize();
        }

        @Override
        int paramHeads() {
            return dims.numHeads();
        }

        @Override
        int paramCount() {
            return 3;   // dtBias, aLog, D
        }

        @Override
        void scanBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] in, Tensor[] p, int tokens, Tensor y) {
            b.mamba2ScanBatch(states, layout, in[0], in[1], p[0], p[1], p[2], dims, tokens, y);
        }

        @Override
        void scanStatesBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] in, Tensor[] p,
                             Tensor[][] scratch, int tokens, Tensor y) {
            b.mamba2ScanStatesBatch(states, layout, in[0], in[1], p[0], p[1], p[2], dims, scratch, tokens, y);
        }

        @Override
        void replayVerifyBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts,
                               Tensor[] in, Tensor[] p, Tensor[] next, int tokens, Tensor y) {
            b.mamba2ReplayVerifyBatch(states, layout, previous, counts, in[0], in[1], p[0], p[1], p[2], dims, next,
                    tokens, y);
        }
    }

    private static final class Gdn extends StateWorkload {
        private final GdnDims dims;

        Gdn(GdnDims dims) {
            this.dims = dims;
        }

        @Override
        String arch() {
            return "gdn";
        }

        @Override
        int[] stateShape(StateLayout layout) {
            int hv = dims.numValueHeads();
            return layout == StateLayout.KV ? new int[] {hv, dims.keyHeadDim(), dims.valueHeadDim()}
                    : new int[] {hv, dims.valueHeadDim(), dims.keyHeadDim()};
        }

        @Override
        int historyWidth() {
            return dims.keyDim() + dims.valueDim() + 2 * dims.numValueHeads();
        }

        @Override
        int[] inputColumns() {
            return new int[] {dims.convDim(), dims.numValueHeads(), dims.numValueHeads()};   // qkv, a, b
        }

        @Override
        int outputColumns() {
            return dims.valueDim();
        }

        @Override
        int paramHeads() {
            return dims.numValueHeads();
        }

        @Override
        int paramCount() {
            return 2;   // aLog, dtBias
        }

        @Override
        void scanBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] in, Tensor[] p, int tokens, Tensor o) {
            b.gatedDeltaScanBatch(states, layout, in[0], in[1], in[2], p[0], p[1], dims, tokens, o);
        }

        @Override
        void scanStatesBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] in, Tensor[] p,
                             Tensor[][] scratch, int tokens, Tensor o) {
            b.gatedDeltaScanStatesBatch(states, layout, in[0], in[1], in[2], p[0], p[1], dims, scratch, tokens, o);
        }

        @Override
        void replayVerifyBatch(Backend b, Tensor[] states, StateLayout layout, Tensor[] previous, int[] counts,
                               Tensor[] in, Tensor[] p, Tensor[] next, int tokens, Tensor o) {
            b.gatedDeltaReplayVerifyBatch(states, layout, previous, counts, in[0], in[1], in[2], p[0], p[1], dims,
                    next, tokens, o);
        }
    }

    @Override
    public String toString() {
        return arch() + Arrays.toString(stateShape(StateLayout.KV));
    }
}
