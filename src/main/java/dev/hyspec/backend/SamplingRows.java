package dev.hyspec.backend;

import dev.hyspec.sampling.SamplingParams;

/** The per-row arguments of {@link Backend#sample}, checked once for every backend. */
public final class SamplingRows {
    private SamplingRows() {}

    /**
     * The parameters of row {@code r} as a request's {@link SamplingParams}.
     *
     * @throws IllegalArgumentException naming the row and field when a value is out of range
     */
    public static SamplingParams params(int r, double[] temperature, int[] topK, double[] topP) {
        try {
            return new SamplingParams(temperature[r], topP[r], topK[r], null, 1, null, false).validate();
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("sampling row " + r + ": " + e.getMessage(), e);
        }
    }

    /**
     * Checks that every array has one entry per row of {@code logits [rows, vocab]}, every row's
     * parameters are in range and every draw is in {@code [0, 1)}.
     */
    public static void check(int rows, int vocab, double[] temperature, int[] topK, double[] topP, double[] uniform) {
        if (vocab <= 0 || temperature.length != rows || topK.length != rows || topP.length != rows
                || uniform.length != rows) {
            throw new IllegalArgumentException("sample: logits [" + rows + ", " + vocab + "] with "
                    + temperature.length + " temperatures, " + topK.length + " topK, " + topP.length + " topP and "
                    + uniform.length + " draws");
        }
        for (int r = 0; r < rows; r++) {
            params(r, temperature, topK, topP);
            if (!(uniform[r] >= 0.0 && uniform[r] < 1.0)) {
                throw new IllegalArgumentException("sampling row " + r + ": the uniform draw must be in [0, 1), got "
                        + uniform[r]);
            }
        }
    }
}
