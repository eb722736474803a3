package dev.hyspec.checkpoint;

import java.util.Arrays;
import java.util.Optional;

/** Element types a checkpoint tensor may have; every one is widened to float32 for compute. */
public enum DType {
    F32("F32", 4),
    BF16("BF16", 2),
    F16("F16", 2);

    private final String safetensorsName;
    private final int bytes;

    DType(String safetensorsName, int bytes) {
        this.safetensorsName = safetensorsName;
        this.bytes = bytes;
    }

    /** Size of one element in bytes. */
    public int bytes() {
        return bytes;
    }

    /** The dtype for a safetensors header name ("F32", "BF16", "F16"), if supported. */
    public static Optional<DType> fromSafetensors(String name) {
        return Arrays.stream(values()).filter(d -> d.safetensorsName.equals(name)).findFirst();
    }

    public String safetensorsName() {
        return safetensorsName;
    }

    /** bfloat16 bits to float: the upper half of an IEEE float32. */
    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xffff) << 16);
    }

    /** float to bfloat16 bits, rounded to nearest even (finite inputs). */
    public static short floatToBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        return (short) ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16);
    }

    /** IEEE half bits to float. */
    public static float f16ToFloat(short bits) {
        int h = bits & 0xffff;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1f;
        int mant = h & 0x3ff;
        if (exp == 0x1f) {                       // inf / NaN
            return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        }
        if (exp == 0) {                          // zero / subnormal: mant · 2^-24
            float v = mant * 0x1p-24f;
            return sign == 0 ? v : -v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }
}
