package dev.hyspec.model;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.checkpoint.TensorEntry;
import java.util.stream.IntStream;

/**
 * Loads a layer's parameters from a checkpoint onto a backend, checking every shape: matrices stay
 * in their checkpoint dtype, vectors (norms, biases, per-head parameters) become float32.
 */
public final class Weights {
    private final Checkpoint checkpoint;
    private final Backend backend;

    public Weights(Checkpoint checkpoint, Backend backend) {
        this.checkpoint = checkpoint;
        this.backend = backend;
    }

    public Backend backend() {
        return backend;
    }

    /** Matrix {@code name [rows, cols]}. */
    public Tensor matrix(String name, int rows, int cols) {
        return backend.weight(checkpoint.tensor(name, rows, cols));
    }

    /** Rows {@code [from, from + count)} of matrix {@code name [rows, cols]}. */
    public Tensor matrixRows(String name, int rows, int cols, int from, int count) {
        return matrixRows(name, rows, cols, IntStream.range(from, from + count).toArray());
    }

    /** The listed rows of matrix {@code name [rows, cols]}, in order. */
    public Tensor matrixRows(String name, int rows, int cols, int[] rowIndex) {
        return backend.weightRows(checkpoint.tensor(name, rows, cols), rowIndex);
    }

    /** Tensor {@code name} of exactly {@code shape}, as float32. */
    public Tensor vector(String name, int... shape) {
        TensorEntry e = checkpoint.tensor(name, shape);
        return backend.upload(e.toFloatArray(), shape);
    }

    /** Elements {@code [from, from + count)} of vector {@code name [n]}, as float32. */
    public Tensor vectorSlice(String name, int n, int from, int count) {
        float[] all = checkpoint.tensor(name, n).toFloatArray();
        float[] part = new float[count];
        System.arraycopy(all, from, part, 0, count);
        return backend.upload(part, count);
    }

    /** Like {@link #vector}, or null when the checkpoint has no such tensor. */
    public Tensor optionalVector(String name, int... shape) {
        return checkpoint.find(name).isPresent() ? vector(name, shape) : null;
    }

    public boolean has(String name) {
        return checkpoint.find(name).isPresent();
    }
}
