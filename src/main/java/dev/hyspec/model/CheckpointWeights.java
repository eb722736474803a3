package dev.hyspec.model;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.Checkpoint;

/** Parameters read from a checkpoint, every shape checked against what the layer asks for. */
final class CheckpointWeights implements WeightSource {
    private final Checkpoint checkpoint;
    private final Backend backend;

    CheckpointWeights(Checkpoint checkpoint, Backend backend) {
        this.checkpoint = checkpoint;
        this.backend = backend;
    }

    @Override
    public Tensor matrix(String name, int rows, int cols) {
        return backend.weight(checkpoint.tensor(name, rows, cols));
    }

    @Override
    public Tensor matrixRows(String name, int rows, int cols, int[] rowIndex) {
        return backend.weightRows(checkpoint.tensor(name, rows, cols), rowIndex);
    }

    @Override
    public int elementBytes(String name) {
        return checkpoint.tensor(name).dtype().bytes();
    }

    @Override
    public float[] values(String name, int... shape) {
        return checkpoint.tensor(name, shape).toFloatArray();
    }

    @Override
    public boolean has(String name) {
        return checkpoint.find(name).isPresent();
    }
}
