package dev.hyspec.bench;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import dev.hyspec.bench.StateWorkload.Op;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The spot check that keeps a broken kernel from posting a fast number: one call of an operation
 * at the benchmark's shape on {@value #ROWS} rows with random inputs, on the benchmarked backend and
 * on the CPU reference (the batched defaults of {@link Backend}), compared output by output — the
 * token outputs, every state written and every history row written. Outputs on the benchmarked
 * backend are NaN-poisoned first, so an element it fails to write shows up.
 */
final class StateUpdateCheck {
    static final int ROWS = 2;
    /** Largest relative error ({@code max|x − ref| / max|ref|}) a float32 state update may show. */
    static final double TOLERANCE = 1e-4;

    record Result(String arch, String op, StateLayout layout, int tokens, double relativeError) {
        boolean passed() {
            return relativeError <= TOLERANCE;   // false for NaN
        }
    }

    private StateUpdateCheck() {}

    static Result run(StateWorkload w, Op op, StateLayout layout, int tokens, Backend tested, Backend reference,
                      RandomPool random) {
        int[] cols = w.inputColumns();
        float[][] state = new float[ROWS][];
        for (int r = 0; r < ROWS; r++) {
            state[r] = random.take(Math.toIntExact(w.stateElements()), 0.5f);
        }
        float[][] params = new float[w.paramCount()][];
        for (int i = 0; i < params.length; i++) {
            params[i] = random.take(w.paramHeads(), 0.5f);
        }
        float[][] first = new float[cols.length][];
        float[][] second = new float[cols.length][];
        for (int i = 0; i < cols.length; i++) {
            first[i] = random.take(ROWS * tokens * cols[i]);
            second[i] = random.take(ROWS * tokens * cols[i]);
        }
        List<float[]> expected = outputs(w, op, layout, tokens, reference, state, params, first, second);
        List<float[]> actual = outputs(w, op, layout, tokens, tested, state, params, first, second);
        double worst = 0;
        for (int i = 0; i < expected.size(); i++) {
            double e = relativeError(expected.get(i), actual.get(i));
            worst = Double.isNaN(e) || Double.isNaN(worst) ? Double.NaN : Math.max(worst, e);
        }
        return new Result(w.arch(), op.label, layout, tokens, worst);
    }

    /**
     * Runs {@code op} on backend {@code b} and returns what it wrote. Replay first runs a step with
     * counts 0 on {@code first} (which writes the history the second step replays), then the
     * measured step on {@code second}.
     */
    private static List<float[]> outputs(StateWorkload w, Op op, StateLayout layout, int tokens, Backend b,
                                         float[][] state, float[][] params, float[][] first, float[][] second) {
        int[] shape = w.stateShape(layout);
        int[] cols = w.inputColumns();
        List<Tensor> owned = new ArrayList<>();
        Tensor[] p = new Tensor[params.length];
        for (int i = 0; i < p.length; i++) {
            p[i] = own(owned, b.upload(params[i], params[i].length));
        }
        Tensor[] states = new Tensor[ROWS];
        for (int r = 0; r < ROWS; r++) {
            states[r] = own(owned, b.upload(state[r], shape));
        }
        Tensor[] in = new Tensor[cols.length];
        for (int i = 0; i < cols.length; i++) {
            in[i] = own(owned, b.upload(second[i], ROWS * tokens, cols[i]));
        }
        Tensor out = own(owned, poisoned(b, ROWS * tokens, w.outputColumns()));
        List<Tensor> written = new ArrayList<>(List.of(out));
        switch (op) {
            case REPLAY -> {
                Tensor[] in1 = new Tensor[cols.length];
                for (int i = 0; i < cols.length; i++) {
                    in1[i] = own(owned, b.upload(first[i], ROWS * tokens, cols[i]));
                }
                Tensor[] previous = new Tensor[ROWS];
                Tensor[] next = new Tensor[ROWS];
                for (int r = 0; r < ROWS; r++) {
                    previous[r] = own(owned, b.zeros(tokens, w.historyWidth()));
                    next[r] = own(owned, poisoned(b, tokens, w.historyWidth()));
                }
                Tensor out1 = own(owned, b.zeros(ROWS * tokens, w.outputColumns()));
                w.replayVerifyBatch(b, states, layout, next, new int[ROWS], in1, p, previous, tokens, out1);
                int[] counts = new int[ROWS];
                Arrays.fill(counts, tokens);
                w.replayVerifyBatch(b, states, layout, previous, counts, in, p, next, tokens, out);
                written.addAll(List.of(states));
                written.addAll(List.of(next));
            }
            case INTERMEDIATE_COPY -> {
                Tensor[][] scratch = new Tensor[ROWS][tokens];
                Tensor[] last = new Tensor[ROWS];
                for (int r = 0; r < ROWS; r++) {
                    for (int t = 0; t < tokens; t++) {
                        scratch[r][t] = own(owned, poisoned(b, shape));
                        written.add(scratch[r][t]);
                    }
                    last[r] = scratch[r][tokens - 1];
                }
                w.scanStatesBatch(b, states, layout, in, p, scratch, tokens, out);
                b.copyBatch(last, states);
                written.addAll(List.of(states));
            }
            case DECODE -> {
                w.scanBatch(b, states, layout, in, p, tokens, out);
                written.addAll(List.of(states));
            }
        }
        List<float[]> result = new ArrayList<>();
        for (Tensor t : written) {
            result.add(b.download(t));
        }
        owned.forEach(b::free);
        return result;
    }

    private static Tensor own(List<Tensor> owned, Tensor t) {
        owned.add(t);
        return t;
    }

    private static Tensor poisoned(Backend b, int... shape) {
        int n = 1;
        for (int d : shape) {
            n *= d;
        }
        float[] nan = new float[n];
        Arrays.fill(nan, Float.NaN);
        return b.upload(nan, shape);
    }

    /** {@code max|x − ref| / max|ref|}; NaN when {@code x} has a non-finite element where {@code ref} is finite. */
    static double relativeError(float[] ref, float[] x) {
        if (ref.length != x.length) {
            throw new IllegalArgumentException("lengths differ: " + ref.length + " vs " + x.length);
        }
        double maxRef = 0;
        double maxErr = 0;
        for (int i = 0; i < ref.length; i++) {
            if (!Float.isFinite(x[i]) && Float.isFinite(ref[i])) {
                return Double.NaN;
            }
            maxRef = Math.max(maxRef, Math.abs(ref[i]));
            maxErr = Math.max(maxErr, Math.abs((double) x[i] - ref[i]));
        }
        return maxErr / Math.max(maxRef, 1e-30);
    }
}
