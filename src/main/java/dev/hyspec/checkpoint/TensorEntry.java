package dev.hyspec.checkpoint;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * One tensor of a checkpoint: its name, dtype, shape and its bytes, a little-endian view into the
 * memory-mapped file (nothing is copied onto the heap).
 */
public record TensorEntry(String name, DType dtype, int[] shape, ByteBuffer data) {

    public long numElements() {
        long n = 1;
        for (int d : shape) {
            n *= d;
        }
        return n;
    }

    /** A fresh little-endian duplicate positioned at 0, safe to use from one thread. */
    public ByteBuffer bytes() {
        return data.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * The bytes of rows {@code rows[i]} (outermost dimension) in that order, little-endian: a view of
     * the mapped file when the rows are consecutive, else a direct copy.
     */
    public ByteBuffer rows(int[] rows) {
        long rowBytes = numElements() / shape[0] * dtype.bytes();
        ByteBuffer src = bytes();
        for (int r : rows) {
            if (r < 0 || r >= shape[0]) {
                throw new IndexOutOfBoundsException("row " + r + " of " + this);
            }
        }
        boolean consecutive = true;
        for (int i = 1; i < rows.length; i++) {
            consecutive &= rows[i] == rows[i - 1] + 1;
        }
        if (consecutive && rows.length > 0) {
            return src.slice((int) (rows[0] * rowBytes), (int) (rows.length * rowBytes)).order(ByteOrder.LITTLE_ENDIAN);
        }
        ByteBuffer dst = ByteBuffer.allocateDirect(Math.toIntExact(rowBytes * rows.length)).order(ByteOrder.LITTLE_ENDIAN);
        for (int r : rows) {
            dst.put(src.slice((int) (r * rowBytes), (int) rowBytes));
        }
        return dst.flip();
    }

    /** Element {@code i} widened to float32. */
    public float get(ByteBuffer bytes, long i) {
        return switch (dtype) {
            case F32 -> bytes.getFloat((int) (i * 4));
            case BF16 -> DType.bf16ToFloat(bytes.getShort((int) (i * 2)));
            case F16 -> DType.f16ToFloat(bytes.getShort((int) (i * 2)));
        };
    }

    /** All elements widened to float32: for small tensors (norm weights, biases, per-head vectors). */
    public float[] toFloatArray() {
        long n = numElements();
        if (n > Integer.MAX_VALUE - 8) {
            throw new IllegalStateException("tensor " + name + " is too large to copy to the heap");
        }
        ByteBuffer b = bytes();
        float[] out = new float[(int) n];
        for (int i = 0; i < out.length; i++) {
            out[i] = get(b, i);
        }
        return out;
    }

    /** Throws a {@link CheckpointException} unless the shape is exactly {@code expected}. */
    public TensorEntry requireShape(int... expected) {
        if (!Arrays.equals(shape, expected)) {
            throw new CheckpointException("tensor " + name + " has shape " + Arrays.toString(shape)
                    + ", expected " + Arrays.toString(expected));
        }
        return this;
    }

    @Override
    public String toString() {
        return name + " " + dtype + Arrays.toString(shape);
    }
}
