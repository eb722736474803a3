package dev.hyspec.bench;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import java.util.Arrays;

/**
 * One independent set of R rows of a {@link StateWorkload}, as a batch of verify rows holds them:
 * each row's state slot, its intermediate-copy scratch slots, its replay histories (the previous
 * step's, read by replay, and this step's, written), and the batch's stacked token inputs and
 * outputs. The benchmark cycles through several sets so that no call finds its state in L2.
 */
final class StateRows {
    private final StateWorkload workload;
    private final Backend backend;
    private final StateLayout layout;
    private final int batch;
    private final Tensor[] states;       // [R] of stateShape(layout)
    private final Tensor[][] scratch;    // [R][maxTokens] of stateShape(layout); null when only replay runs
    private final Tensor[] previous;     // [R] of [maxTokens, historyWidth]: the previous step's history
    private final Tensor[] next;         // [R] of [maxTokens, historyWidth]: this step's history
    private Tensor[] inputs = new Tensor[0];   // [R·T, inputColumns[i]]
    private Tensor out;                  // [R·T, outputColumns]
    private int tokens;
    private int[] counts;                // [R], all T: the previous step's tokens were all accepted
    private Tensor[][] scratchForTokens; // [R][T], the first T scratch slots
    private Tensor[] lastScratch;        // [R], scratch slot T−1 (what intermediate-copy commits)

    /** Allocates the rows, each state a copy of {@code stateTemplate} (already in {@code layout}). */
    StateRows(StateWorkload workload, Backend backend, StateLayout layout, int batch, int maxTokens,
              boolean withScratch, Tensor stateTemplate) {
        this.workload = workload;
        this.backend = backend;
        this.layout = layout;
        this.batch = batch;
        int[] shape = workload.stateShape(layout);
        states = new Tensor[batch];
        scratch = withScratch ? new Tensor[batch][maxTokens] : null;
        previous = new Tensor[batch];
        next = new Tensor[batch];
        for (int r = 0; r < batch; r++) {
            states[r] = backend.zeros(shape);
            backend.copy(stateTemplate, states[r]);
            previous[r] = backend.zeros(maxTokens, workload.historyWidth());
            next[r] = backend.zeros(maxTokens, workload.historyWidth());
            for (int t = 0; withScratch && t < maxTokens; t++) {
                scratch[r][t] = backend.zeros(shape);
            }
        }
    }

    /** Replaces the token inputs with fresh ones of {@code tokens} tokens per row. */
    void setTokens(int tokens, RandomPool random) {
        freeInputs();
        this.tokens = tokens;
        int[] cols = workload.inputColumns();
        inputs = new Tensor[cols.length];
        for (int i = 0; i < cols.length; i++) {
            inputs[i] = backend.upload(random.take(batch * tokens * cols[i]), batch * tokens, cols[i]);
        }
        out = backend.zeros(batch * tokens, workload.outputColumns());
        counts = new int[batch];
        Arrays.fill(counts, tokens);
        if (scratch != null) {
            scratchForTokens = new Tensor[batch][];
            lastScratch = new Tensor[batch];
            for (int r = 0; r < batch; r++) {
                scratchForTokens[r] = Arrays.copyOf(scratch[r], tokens);
                lastScratch[r] = scratch[r][tokens - 1];
            }
        }
    }

    Backend backend() {
        return backend;
    }

    StateLayout layout() {
        return layout;
    }

    int batch() {
        return batch;
    }

    int tokens() {
        return tokens;
    }

    Tensor[] states() {
        return states;
    }

    Tensor[][] scratch() {
        if (scratchForTokens == null) {
            throw new IllegalStateException("these rows were allocated without intermediate-copy scratch slots");
        }
        return scratchForTokens;
    }

    Tensor[] lastScratch() {
        scratch();
        return lastScratch;
    }

    Tensor[] previous() {
        return previous;
    }

    Tensor[] next() {
        return next;
    }

    int[] counts() {
        return counts;
    }

    Tensor[] inputs() {
        return inputs;
    }

    Tensor out() {
        return out;
    }

    private void freeInputs() {
        for (Tensor t : inputs) {
            backend.free(t);
        }
        inputs = new Tensor[0];
        if (out != null) {
            backend.free(out);
            out = null;
        }
    }

    void free() {
        freeInputs();
        for (int r = 0; r < batch; r++) {
            backend.free(states[r]);
            backend.free(previous[r]);
            backend.free(next[r]);
            if (scratch != null) {
                for (Tensor s : scratch[r]) {
                    backend.free(s);
                }
            }
        }
    }
}
