package dev.hyspec.backend.cpu;

import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.DType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;

/**
 * A 2-D weight kept in its checkpoint dtype, read straight from the memory-mapped file (or from an
 * off-heap copy when its rows were reordered); rows are widened to float32 as they are read.
 */
final class CpuWeight implements Tensor {
    final ByteBuffer bytes;   // little-endian, [rows, cols] in dtype
    private final FloatBuffer floats;  // the same bytes as floats, when dtype is F32
    final DType dtype;
    final int rows;
    final int cols;
    private final int[] shape;

    CpuWeight(ByteBuffer bytes, DType dtype, int[] shape) {
        this.bytes = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        this.floats = dtype == DType.F32 ? this.bytes.asFloatBuffer() : null;
        this.dtype = dtype;
        this.shape = shape.clone();
        this.rows = shape.length == 0 ? 1 : shape[0];
        this.cols = (int) (numel() / Math.max(rows, 1));
    }

    @Override
    public int[] shape() {
        return shape.clone();
    }

    /** Widens row {@code r} into {@code dst[0, cols)}. */
    void readRow(int r, float[] dst) {
        long base = (long) r * cols;
        switch (dtype) {
            case F32 -> floats.get((int) base, dst, 0, cols);
            case BF16 -> {
                int off = (int) (base * 2);
                for (int i = 0; i < cols; i++) {
                    dst[i] = Float.intBitsToFloat((bytes.getShort(off + 2 * i) & 0xffff) << 16);
                }
            }
            case F16 -> {
                int off = (int) (base * 2);
                for (int i = 0; i < cols; i++) {
                    dst[i] = DType.f16ToFloat(bytes.getShort(off + 2 * i));
                }
            }
        }
    }

    @Override
    public String toString() {
        return "CpuWeight" + dtype + Arrays.toString(shape);
    }
}
