package dev.hyspec.model;

import dev.hyspec.backend.Tensor;

/**
 * Where a model's parameters come from, by their checkpoint names: a checkpoint on disk
 * ({@link CheckpointWeights}) or values generated for a config on the backend itself
 * ({@link GeneratedWeights}, for benchmarks of model shapes whose weights are not at hand).
 */
interface WeightSource {

    /** Matrix {@code name [rows, cols]} on the backend, in its stored dtype. */
    Tensor matrix(String name, int rows, int cols);

    /** Rows {@code rowIndex[i]} of matrix {@code name [rows, cols]}, in that order: {@code [rowIndex.length, cols]}. */
    Tensor matrixRows(String name, int rows, int cols, int[] rowIndex);

    /** Bytes per element of matrix {@code name} as it is stored. */
    int elementBytes(String name);

    /** Tensor {@code name} of exactly {@code shape}, widened to float32 on the host (small tensors only). */
    float[] values(String name, int... shape);

    boolean has(String name);
}
