package dev.hyspec.testing;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.checkpoint.SafetensorsFile;
import dev.hyspec.checkpoint.TensorEntry;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.UnaryOperator;

/**
 * Writes {@code .safetensors} files for tests: an 8-byte little-endian header length, a JSON header
 * ({@code name -> {dtype, shape, data_offsets}}, tensors in the order given, optionally
 * {@code "__metadata__": {"format": "pt"}} first), padded with spaces to a multiple of 8, then the
 * raw tensor bytes back to back. Also converts float32 to BF16 / F16 bytes and writes sharded
 * checkpoints the way transformers does ({@code model-0000i-of-0000N.safetensors} plus
 * {@code model.safetensors.index.json}).
 *
 * <p>The writer does not validate: a tensor's bytes need not match its dtype and shape, and the dtype
 * may be any string ("F64", "I32"), which is what tests of broken checkpoints need.
 */
public final class SafetensorsWriter {
    private static final ObjectMapper JSON = new ObjectMapper();

    private SafetensorsWriter() {}

    /** One tensor to write: its name, safetensors dtype string, shape and raw little-endian bytes. */
    public record Tensor(String name, String dtype, int[] shape, byte[] data) {
        public Tensor {
            shape = shape.clone();
        }

        /** A copy of a checkpoint tensor, bytes and all. */
        public static Tensor of(TensorEntry e) {
            ByteBuffer b = e.bytes();
            byte[] data = new byte[b.remaining()];
            b.get(data);
            return new Tensor(e.name(), e.dtype().safetensorsName(), e.shape(), data);
        }

        /** A float32 tensor. */
        public static Tensor f32(String name, int[] shape, float[] values) {
            return new Tensor(name, "F32", shape, f32Bytes(values));
        }

        public Tensor withName(String newName) {
            return new Tensor(newName, dtype, shape, data);
        }

        public Tensor withDtype(String newDtype) {
            return new Tensor(name, newDtype, shape, data);
        }

        public Tensor withShape(int... newShape) {
            return new Tensor(name, dtype, newShape, data);
        }

        public Tensor withData(byte[] newData) {
            return new Tensor(name, dtype, shape, newData);
        }

        @Override
        public String toString() {
            return name + " " + dtype + Arrays.toString(shape) + " (" + data.length + " bytes)";
        }
    }

    // ---------------------------------------------------------------- single files

    /** Writes {@code tensors} in order, with {@code "__metadata__": {"format": "pt"}} as transformers does. */
    public static void write(Path file, List<Tensor> tensors) {
        write(file, tensors, true);
    }

    /** Writes {@code tensors} in order, with or without the {@code __metadata__} entry. */
    public static void write(Path file, List<Tensor> tensors, boolean withMetadata) {
        ObjectNode header = JSON.createObjectNode();
        if (withMetadata) {
            header.putObject("__metadata__").put("format", "pt");
        }
        long offset = 0;
        for (Tensor t : tensors) {
            ObjectNode n = header.putObject(t.name());
            n.put("dtype", t.dtype());
            ArrayNode shape = n.putArray("shape");
            for (int d : t.shape()) {
                shape.add(d);
            }
            n.putArray("data_offsets").add(offset).add(offset + t.data().length);
            offset += t.data().length;
        }
        byte[] json;
        try {
            json = JSON.writeValueAsBytes(header);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        int padded = (json.length + 7) / 8 * 8;
        byte[] headerBytes = Arrays.copyOf(json, padded);
        Arrays.fill(headerBytes, json.length, padded, (byte) ' ');
        try (OutputStream out = Files.newOutputStream(file)) {
            out.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(padded).array());
            out.write(headerBytes);
            for (Tensor t : tensors) {
                out.write(t.data());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Every tensor of an existing safetensors file, in header order, as {@link Tensor}s. */
    public static List<Tensor> read(Path file) {
        List<Tensor> out = new ArrayList<>();
        for (TensorEntry e : SafetensorsFile.open(file).tensors().values()) {
            out.add(Tensor.of(e));
        }
        return out;
    }

    /** Reads {@code from}, applies {@code edit} to the tensor list and writes the result to {@code to}. */
    public static void rewrite(Path from, Path to, UnaryOperator<List<Tensor>> edit) {
        List<Tensor> tensors = edit.apply(new ArrayList<>(read(from)));
        write(to, tensors);
    }

    // ---------------------------------------------------------------- sharded checkpoints

    /** The shard name transformers uses: {@code model-00001-of-00003.safetensors}. */
    public static String shardName(int index, int shards) {
        return String.format("model-%05d-of-%05d.safetensors", index + 1, shards);
    }

    /** {@link #writeShardedTensors} for checkpoint tensors (copied byte for byte, in map order). */
    public static Map<String, String> writeSharded(Path dir, Map<String, TensorEntry> tensors, int shards) {
        List<Tensor> list = new ArrayList<>();
        tensors.values().forEach(e -> list.add(Tensor.of(e)));
        return writeShardedTensors(dir, list, shards);
    }

    /**
     * Splits {@code tensors} (in order) into {@code shards} consecutive groups of about equal byte
     * size, each with at least one tensor, writes them as {@code model-0000i-of-0000N.safetensors}
     * and writes {@code model.safetensors.index.json} = {@code {"metadata": {"total_size": bytes},
     * "weight_map": {tensor: shard file}}} (weight_map sorted by tensor name, as transformers writes
     * it). Returns the weight map.
     */
    public static Map<String, String> writeShardedTensors(Path dir, List<Tensor> tensors, int shards) {
        if (shards < 1 || shards > tensors.size()) {
            throw new IllegalArgumentException("cannot split " + tensors.size() + " tensors into " + shards + " shards");
        }
        long total = tensors.stream().mapToLong(t -> t.data().length).sum();
        List<List<Tensor>> groups = new ArrayList<>();
        for (int s = 0; s < shards; s++) {
            groups.add(new ArrayList<>());
        }
        long before = 0;
        int current = -1;                       // shard of the previous tensor
        for (int i = 0; i < tensors.size(); i++) {
            Tensor t = tensors.get(i);
            // the shard holding the tensor's middle byte, ...
            int s = (int) Math.min(shards - 1, (before + t.data().length / 2) * shards / Math.max(1, total));
            // ... but never going back, never skipping a shard, and leaving one tensor for each later shard
            s = Math.max(s, Math.max(current, shards - (tensors.size() - i)));
            s = Math.min(s, current + 1);
            groups.get(s).add(t);
            current = s;
            before += t.data().length;
        }
        Map<String, String> weightMap = new TreeMap<>();
        for (int s = 0; s < shards; s++) {
            if (groups.get(s).isEmpty()) {
                throw new IllegalStateException("shard " + s + " came out empty");
            }
            String name = shardName(s, shards);
            write(dir.resolve(name), groups.get(s));
            for (Tensor t : groups.get(s)) {
                weightMap.put(t.name(), name);
            }
        }
        writeIndex(dir, total, weightMap);
        return weightMap;
    }

    /** Writes {@code model.safetensors.index.json} with the given total size and weight map. */
    public static void writeIndex(Path dir, long totalSize, Map<String, String> weightMap) {
        ObjectNode root = JSON.createObjectNode();
        root.putObject("metadata").put("total_size", totalSize);
        ObjectNode map = root.putObject("weight_map");
        weightMap.forEach(map::put);
        try {
            Files.writeString(dir.resolve("model.safetensors.index.json"),
                    JSON.writerWithDefaultPrettyPrinter().writeValueAsString(root) + "\n", StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    // ---------------------------------------------------------------- dtype conversion

    /** float32 values as little-endian F32 bytes. */
    public static byte[] f32Bytes(float[] values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            b.putFloat(v);
        }
        return b.array();
    }

    /** float32 values as little-endian BF16 bytes, rounded to nearest even. */
    public static byte[] bf16Bytes(float[] values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            b.putShort(toBf16(v));
        }
        return b.array();
    }

    /** float32 values as little-endian IEEE half (F16) bytes, rounded to nearest even. */
    public static byte[] f16Bytes(float[] values) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            b.putShort(toF16(v));
        }
        return b.array();
    }

    /** float32 to bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN. */
    public static short toBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) {
            return (short) ((bits >>> 16) | 0x0040);
        }
        int lsb = (bits >>> 16) & 1;
        return (short) ((bits + 0x7fff + lsb) >>> 16);
    }

    /**
     * float32 to IEEE half bits, round to nearest even: overflow becomes ±inf, tiny values become
     * half subnormals or ±0, NaN stays a (quiet) NaN.
     */
    public static short toF16(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int exp = (bits >>> 23) & 0xff;
        int mant = bits & 0x7fffff;
        if (exp == 0xff) {                              // inf / NaN
            return (short) (sign | 0x7c00 | (mant != 0 ? 0x0200 | (mant >>> 13) : 0));
        }
        int e = exp - 127 + 15;                         // half exponent field
        if (e >= 0x1f) {                                // too large: inf
            return (short) (sign | 0x7c00);
        }
        if (e <= 0) {                                   // half subnormal (or zero): m · 2^-24
            if (e < -10) {                              // below 2^-25: rounds to zero
                return (short) sign;
            }
            int full = mant | 0x800000;                 // value = full · 2^(exp-150)
            int shift = 14 - e;                         // m = full / 2^(126-exp)
            int m = full >>> shift;
            int rem = full & ((1 << shift) - 1);
            int half = 1 << (shift - 1);
            if (rem > half || (rem == half && (m & 1) == 1)) {
                m++;                                    // may carry into the smallest normal, which is right
            }
            return (short) (sign | m);
        }
        int h = sign | (e << 10) | (mant >>> 13);
        int rem = mant & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1) == 1)) {
            h++;                                        // may carry into the exponent (up to inf), which is right
        }
        return (short) h;
    }

    /** Re-encodes an F32 checkpoint tensor as BF16. */
    public static Tensor toBf16(TensorEntry e) {
        return new Tensor(e.name(), "BF16", e.shape(), bf16Bytes(e.toFloatArray()));
    }

    /** Re-encodes an F32 checkpoint tensor as F16. */
    public static Tensor toF16(TensorEntry e) {
        return new Tensor(e.name(), "F16", e.shape(), f16Bytes(e.toFloatArray()));
    }

    /** An ordered name → tensor map of a list, for lookups while editing. */
    public static Map<String, Tensor> byName(List<Tensor> tensors) {
        Map<String, Tensor> out = new LinkedHashMap<>();
        tensors.forEach(t -> out.put(t.name(), t));
        return out;
    }
}
