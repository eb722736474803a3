package dev.hyspec.backend.cpu;

import dev.hyspec.backend.Tensor;
import java.util.Arrays;

/** A float32 tensor on the Java heap, row-major. */
final class CpuTensor implements Tensor {
    final float[] data;
    private final int[] shape;

    CpuTensor(float[] data, int[] shape) {
        this.data = data;
        this.shape = shape.clone();
        if (numel() != data.length) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " does not hold " + data.length);
        }
    }

    @Override
    public int[] shape() {
        return shape.clone();
    }

    @Override
    public String toString() {
        return "CpuTensor" + Arrays.toString(shape);
    }
}
