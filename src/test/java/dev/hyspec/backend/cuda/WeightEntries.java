package dev.hyspec.backend.cuda;

import dev.hyspec.checkpoint.DType;
import dev.hyspec.checkpoint.TensorEntry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Checkpoint entries made from floats, for loading the same weight into both backends in any dtype.
 * {@link #representable} rounds values to what the dtype stores, so a reference computed from the
 * rounded floats sees exactly the weight the kernel widens.
 */
final class WeightEntries {
    private WeightEntries() {}

    /** bfloat16 round-to-nearest-even of {@code v}, as a float. */
    static float bf16(float v) {
        int bits = Float.floatToRawIntBits(v);
        bits = (bits + 0x7fff + ((bits >>> 16) & 1)) & 0xffff0000;
        return Float.intBitsToFloat(bits);
    }

    /** {@code v} rounded to 10 mantissa bits, |v| < 1e-4 flushed to zero: exact in IEEE half. */
    static float half(float v) {
        if (Math.abs(v) < 1e-4f) {
            return 0f;
        }
        int bits = Float.floatToRawIntBits(v);
        bits = (bits + 0xfff + ((bits >>> 13) & 1)) & ~0x1fff;
        return Float.intBitsToFloat(bits);
    }

    static float[] representable(float[] v, DType dtype) {
        float[] out = v.clone();
        for (int i = 0; i < out.length; i++) {
            out[i] = switch (dtype) {
                case F32 -> out[i];
                case BF16 -> bf16(out[i]);
                case F16 -> half(out[i]);
            };
        }
        return out;
    }

    /** An entry holding {@code v} (already representable in {@code dtype}). */
    static TensorEntry entry(String name, DType dtype, float[] v, int... shape) {
        ByteBuffer b = ByteBuffer.allocateDirect(Math.max(1, v.length * dtype.bytes())).order(ByteOrder.LITTLE_ENDIAN);
        for (float f : v) {
            switch (dtype) {
                case F32 -> b.putFloat(f);
                case BF16 -> b.putShort((short) (Float.floatToRawIntBits(f) >>> 16));
                case F16 -> b.putShort(halfBits(f));
            }
        }
        b.flip();
        TensorEntry e = new TensorEntry(name, dtype, shape, b);
        ByteBuffer check = e.bytes();
        for (int i = 0; i < v.length; i++) {
            if (Float.floatToRawIntBits(e.get(check, i)) != Float.floatToRawIntBits(v[i])) {
                throw new IllegalArgumentException(v[i] + " is not exact in " + dtype);
            }
        }
        return e;
    }

    private static short halfBits(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        if ((bits & 0x7fffffff) == 0) {
            return (short) sign;
        }
        int exp = ((bits >>> 23) & 0xff) - 127 + 15;
        if (exp < 1 || exp > 30) {
            throw new IllegalArgumentException(f + " is outside the normal half range");
        }
        return (short) (sign | exp << 10 | (bits >>> 13) & 0x3ff);
    }
}
