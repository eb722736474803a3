package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.BatchRow;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.model.RowMode;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.RecurrentOps;
import dev.hyspec.state.RecurrentRow;
import dev.hyspec.state.StateStore;

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
        Tensor y = backend.zeros(x.rows(), outputWidth());
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
        Tensor out = finish(y, p);
        backend.free(y);
        for (Tensor t : new Tensor[] {p.raw(), p.side1(), p.side2(), p.gate()}) {
            if (t != null) {
                backend.free(t);
            }
        }
        return out;
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
