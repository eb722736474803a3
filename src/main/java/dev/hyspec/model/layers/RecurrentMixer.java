package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.BatchRow;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.model.RowMode;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.RecurrentOps;
import dev.hyspec.state.RecurrentRow;
import dev.hyspec.state.RollbackStrategy;
import dev.hyspec.state.StateStore;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The batch handling shared by Mamba2 and Gated DeltaNet: projections and output run over every
 * token row at once; the conv and the state recurrence run per row against the row's slot —
 * in place for a prefill chunk, through the row's rollback strategy for a generate row.
 */
abstract class RecurrentMixer implements Mixer, RecurrentOps {
    protected final Backend backend;
    private final int poolLayer;

    RecurrentMixer(Backend backend, int poolLayer) {
        this.backend = backend;
        this.poolLayer = poolLayer;
    }

    @Override
    public final int poolLayer() {
        return poolLayer;
    }

    /** The input projections of all token rows: pre-conv channels, side inputs, and the output gate. */
    protected record Projections(Tensor raw, Tensor side1, Tensor side2, Tensor gate) {}

    protected abstract Projections project(Tensor x);

    /** Width of the recurrence's output per token. */
    protected abstract int outputWidth();

    /** Gated norm and output projection of the recurrence's output {@code y [N, width]}. */
    protected abstract Tensor finish(Tensor y, Projections p);

    @Override
    public final Tensor forward(Tensor x, ForwardBatch batch, StateStore store) {
        MambaStatePool pool = store.pool();
        Projections p = project(x);
        // every row writes its outputs, except that rows of several strategies are added into zeros
        boolean oneStrategy = oneStrategy(batch);
        Tensor y = oneStrategy || batch.tokensPerRow() == 0 ? backend.empty(x.rows(), outputWidth())
                : backend.zeros(x.rows(), outputWidth());
        if (batch.tokensPerRow() > 0) {
            forwardUniform(p, batch, pool, y);
        } else {
            forwardRows(p, batch, pool, y);
        }
        Tensor out = finish(y, p);
        backend.free(y);
        for (Tensor t : new Tensor[] {p.raw(), p.side1(), p.side2(), p.gate()}) {
            if (t != null) {
                backend.free(t);
            }
        }
        return out;
    }

    private static boolean oneStrategy(ForwardBatch batch) {
        for (int r = 1; r < batch.size(); r++) {
            if (batch.row(r).strategy() != batch.row(0).strategy()) {
                return false;
            }
        }
        return true;
    }

    /**
     * A uniform batch of generate rows: each strategy verifies its rows in one batched call (the
     * common case, one strategy, needs no gather at all).
     */
    private void forwardUniform(Projections p, ForwardBatch batch, MambaStatePool pool, Tensor y) {
        int t = batch.tokensPerRow();
        if (oneStrategy(batch)) {   // the common case, without grouping
            int[] slots = new int[batch.size()];
            int[] lengths = new int[batch.size()];
            for (int r = 0; r < batch.size(); r++) {
                slots[r] = batch.row(r).slot();
                lengths[r] = batch.length(r);
            }
            batch.row(0).strategy().verifyBatch(pool, slots, this, new RecurrentRow(p.raw(), p.side1(), p.side2()),
                    lengths, t, y);
            return;
        }
        Map<RollbackStrategy, List<Integer>> groups = new LinkedHashMap<>();
        for (int r = 0; r < batch.size(); r++) {
            groups.computeIfAbsent(batch.row(r).strategy(), k -> new ArrayList<>()).add(r);
        }
        for (Map.Entry<RollbackStrategy, List<Integer>> g : groups.entrySet()) {
            List<Integer> rows = g.getValue();
            int[] slots = new int[rows.size()];
            int[] lengths = new int[rows.size()];
            for (int i = 0; i < rows.size(); i++) {
                slots[i] = batch.row(rows.get(i)).slot();
                lengths[i] = batch.length(rows.get(i));
            }
            if (groups.size() == 1) {
                g.getKey().verifyBatch(pool, slots, this, new RecurrentRow(p.raw(), p.side1(), p.side2()), lengths,
                        t, y);
                continue;
            }
            int[] tokenRows = new int[rows.size() * t];
            for (int i = 0; i < rows.size(); i++) {
                for (int k = 0; k < t; k++) {
                    tokenRows[i * t + k] = rows.get(i) * t + k;
                }
            }
            Tensor raw = gather(p.raw(), tokenRows);
            Tensor side1 = gather(p.side1(), tokenRows);
            Tensor side2 = gather(p.side2(), tokenRows);
            Tensor yg = backend.zeros(tokenRows.length, outputWidth());
            g.getKey().verifyBatch(pool, slots, this, new RecurrentRow(raw, side1, side2), lengths, t, yg);
            float[] ones = new float[tokenRows.length];
            Arrays.fill(ones, 1f);
            backend.scatterAddRows(yg, tokenRows, ones, y);   // y is zero in these rows
            for (Tensor tensor : new Tensor[] {raw, side1, side2, yg}) {
                if (tensor != null) {
                    backend.free(tensor);
                }
            }
        }
    }

    private Tensor gather(Tensor t, int[] tokenRows) {
        if (t == null) {
            return null;
        }
        Tensor out = backend.zeros(tokenRows.length, t.cols());
        backend.gatherRows(t, tokenRows, out);
        return out;
    }

    /** A ragged batch (prefill chunks among the rows): row by row. */
    private void forwardRows(Projections p, ForwardBatch batch, MambaStatePool pool, Tensor y) {
        boolean whole = batch.size() == 1;
        for (int r = 0; r < batch.size(); r++) {
            BatchRow row = batch.row(r);
            int off = batch.offset(r);
            int n = row.length();
            RecurrentRow in = new RecurrentRow(slice(p.raw(), off, n, whole), slice(p.side1(), off, n, whole),
                    slice(p.side2(), off, n, whole));
            Tensor yr = whole ? y : backend.zeros(n, outputWidth());
            if (row.mode() == RowMode.PREFILL) {
                Tensor conv = backend.zeros(n, shape().convDim());
                convolve(in.raw(), pool.conv(poolLayer, row.slot()), true, conv);
                scan(pool.ssm(poolLayer, row.slot()), pool.layout(row.slot()), conv, in, yr);
                backend.free(conv);
            } else {
                row.strategy().verify(pool, row.slot(), this, in, yr);
            }
            if (!whole) {
                backend.copyRows(yr, 0, y, off, n);
                backend.free(yr);
                for (Tensor t : new Tensor[] {in.raw(), in.side1(), in.side2()}) {
                    if (t != null) {
                        backend.free(t);
                    }
                }
            }
        }
    }

    private Tensor slice(Tensor t, int off, int n, boolean whole) {
        if (t == null || whole) {
            return t;
        }
        Tensor s = backend.zeros(n, t.cols());
        backend.copyRows(t, off, s, 0, n);
        return s;
    }
}
