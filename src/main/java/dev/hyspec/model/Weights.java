package dev.hyspec.model;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import java.util.Arrays;
import java.util.stream.IntStream;

/**
 * Hands a layer its parameters on the backend, from a checkpoint or generated
 * ({@link WeightSource}): matrices stay in their stored dtype, vectors (norms, biases, per-head
 * parameters) become float32. Keeps a tally of the matrix bytes it handed out.
 */
public final class Weights {
    private final WeightSource source;
    private final Backend backend;
    private long matrixBytes;

    Weights(WeightSource source, Backend backend) {
        this.source = source;
        this.backend = backend;
    }

    public Backend backend() {
        return backend;
    }

    /** Matrix {@code name [rows, cols]}. */
    public Tensor matrix(String name, int rows, int cols) {
        matrixBytes += (long) rows * cols * source.elementBytes(name);
        return source.matrix(name, rows, cols);
    }

    /** Rows {@code [from, from + count)} of matrix {@code name [rows, cols]}. */
    public Tensor matrixRows(String name, int rows, int cols, int from, int count) {
        return matrixRows(name, rows, cols, IntStream.range(from, from + count).toArray());
    }

    /** The listed rows of matrix {@code name [rows, cols]}, in order. */
    public Tensor matrixRows(String name, int rows, int cols, int[] rowIndex) {
        matrixBytes += (long) rowIndex.length * cols * source.elementBytes(name);
        return source.matrixRows(name, rows, cols, rowIndex);
    }

    /** Tensor {@code name} of exactly {@code shape}, as float32. */
    public Tensor vector(String name, int... shape) {
        return backend.upload(source.values(name, shape), shape);
    }

    /** Elements {@code [from, from + count)} of vector {@code name [n]}, as float32. */
    public Tensor vectorSlice(String name, int n, int from, int count) {
        return backend.upload(Arrays.copyOfRange(source.values(name, n), from, from + count), count);
    }

    /** Like {@link #vector}, or null when the source has no such tensor. */
    public Tensor optionalVector(String name, int... shape) {
        return source.has(name) ? vector(name, shape) : null;
    }

    public boolean has(String name) {
        return source.has(name);
    }

    /** Bytes of every matrix handed out so far (each row-subset counted once, as loaded). */
    long matrixBytes() {
        return matrixBytes;
    }

    /** Bytes of matrix {@code name [rows, cols]} as stored. */
    long matrixBytes(String name, int rows, int cols) {
        return (long) rows * cols * source.elementBytes(name);
    }
}
