package dev.hyspec.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.model.HybridModel;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.Fixtures.Fixture;
import dev.hyspec.testing.SafetensorsWriter;
import dev.hyspec.testing.SafetensorsWriter.Tensor;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Checkpoint layouts and dtypes other than the fixtures' single float32 file: sharded checkpoints
 * (index + {@code model-0000i-of-0000N.safetensors}), BF16 and F16 weights, and the half-precision
 * decoders themselves.
 */
class CheckpointLoadingTest {
    /**
     * BF16 keeps 8 significant bits (relative rounding error ≤ 2^-9 ≈ 0.2% per weight), F16 keeps 11
     * (≤ 2^-12 ≈ 0.025%). Through these 3–6 layer random-weight models that moves the logits by under
     * 2% of their scale (measured on prompt 0: BF16 0.8–1.7%, F16 0.09–0.3% of max|logit|), so the
     * bounds below, relative to max|reference logit|, leave ~3× headroom. A wrong encoding or decoding
     * (byte-swapped halves, F16 bits read as BF16) turns the weights into garbage and moves the logits
     * by the order of their own scale or more, far past either bound ({@link #misconvertedWeightsFailTheBound}).
     */
    static final double BF16_REL_BOUND = 0.05;
    static final double F16_REL_BOUND = 0.01;

    @TempDir
    Path tmp;

    // ---------------------------------------------------------------- sharded

    @ParameterizedTest
    @ValueSource(strings = {"nemotron_h", "qwen3_next", "mamba2", "qwen3_5"})
    void shardedCheckpointHasTheSameTensorsAndBitIdenticalLogits(String name) throws IOException {
        Fixture f = Fixtures.named(name);
        Checkpoint single = Checkpoint.open(f.dir());
        Path dir = Files.createDirectories(tmp.resolve(name));
        copy(f.dir().resolve(Checkpoint.CONFIG), dir.resolve(Checkpoint.CONFIG));
        Map<String, TensorEntry> all = new LinkedHashMap<>();
        single.tensorNames().forEach(n -> all.put(n, single.tensor(n)));
        Map<String, String> weightMap = SafetensorsWriter.writeSharded(dir, all, 3);

        // the layout transformers writes: three shards, an index, no single file
        assertFalse(Files.exists(dir.resolve(Checkpoint.SINGLE)));
        Set<String> shardFiles = new TreeSet<>(weightMap.values());
        assertEquals(Set.of("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                "model-00003-of-00003.safetensors"), shardFiles);
        JsonNode index = new ObjectMapper().readTree(dir.resolve(Checkpoint.INDEX).toFile());
        long totalBytes = all.values().stream().mapToLong(e -> e.bytes().remaining()).sum();
        assertEquals(totalBytes, index.path("metadata").path("total_size").asLong());
        assertEquals(all.size(), index.path("weight_map").size());
        for (String shard : shardFiles) {
            Map<String, TensorEntry> inShard = SafetensorsFile.open(dir.resolve(shard)).tensors();
            assertFalse(inShard.isEmpty(), shard);
            inShard.keySet().forEach(t -> assertEquals(shard, weightMap.get(t), t));
        }

        Checkpoint sharded = Checkpoint.open(dir);
        assertEquals(new HashSet<>(single.tensorNames()), new HashSet<>(sharded.tensorNames()));
        for (String t : single.tensorNames()) {
            TensorEntry a = single.tensor(t);
            TensorEntry b = sharded.tensor(t);
            assertEquals(a.dtype(), b.dtype(), t);
            assertArrayEquals(a.shape(), b.shape(), t);
            assertEquals(a.bytes(), b.bytes(), t + ": bytes differ");
        }
        assertEquals(single.config(), sharded.config());

        int[] prompt = f.prompts().get(0);
        float[] want = logits(single, prompt);
        float[] got = logits(sharded, prompt);
        assertEquals(want.length, got.length);
        for (int i = 0; i < want.length; i++) {
            if (Float.floatToRawIntBits(want[i]) != Float.floatToRawIntBits(got[i])) {
                throw new AssertionError(name + ": sharded logit " + i + " = " + got[i] + ", single file " + want[i]);
            }
        }
        // and both are the right logits, not the same garbage
        assertTrue(maxAbsDiff(want, f.logits(0).toFloatArray()) <= 1e-3, name + " does not match its reference");
    }

    // ---------------------------------------------------------------- BF16 / F16

    @ParameterizedTest
    @ValueSource(strings = {"qwen3_5", "qwen3_next", "nemotron_h", "mamba2"})
    void bf16CheckpointLoadsExactValuesAndCloseLogits(String name) throws IOException {
        halfPrecision(name, DType.BF16, BF16_REL_BOUND);
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen3_5", "qwen3_next", "nemotron_h", "mamba2"})
    void f16CheckpointLoadsExactValuesAndCloseLogits(String name) throws IOException {
        halfPrecision(name, DType.F16, F16_REL_BOUND);
    }

    private void halfPrecision(String name, DType dtype, double relBound) throws IOException {
        Fixture f = Fixtures.named(name);
        Checkpoint original = Checkpoint.open(f.dir());
        Path dir = Files.createDirectories(tmp.resolve(name + "-" + dtype));
        copy(f.dir().resolve(Checkpoint.CONFIG), dir.resolve(Checkpoint.CONFIG));
        List<Tensor> converted = new ArrayList<>();
        for (String t : original.tensorNames()) {
            TensorEntry e = original.tensor(t);
            assertEquals(DType.F32, e.dtype(), t);
            converted.add(dtype == DType.BF16 ? SafetensorsWriter.toBf16(e) : SafetensorsWriter.toF16(e));
        }
        SafetensorsWriter.write(dir.resolve(Checkpoint.SINGLE), converted);

        Checkpoint half = Checkpoint.open(dir);
        assertEquals(original.tensorNames(), half.tensorNames());
        for (String t : original.tensorNames()) {
            TensorEntry e = half.tensor(t);
            assertEquals(dtype, e.dtype(), t);
            assertArrayEquals(original.tensor(t).shape(), e.shape(), t);
            assertEquals(original.tensor(t).numElements() * 2, e.bytes().remaining(), t);
            float[] src = original.tensor(t).toFloatArray();
            float[] got = e.toFloatArray();
            for (int i = 0; i < src.length; i++) {
                // the nearest representable value (ties to even), derived independently of both converters
                float want = dtype == DType.BF16 ? nearestBf16(src[i]) : nearestF16(src[i]);
                if (Float.floatToRawIntBits(want) != Float.floatToRawIntBits(got[i])) {
                    throw new AssertionError(t + "[" + i + "] = " + src[i] + " loads as " + got[i]
                            + " from " + dtype + ", expected " + want);
                }
            }
        }

        float[] ref = f.logits(0).toFloatArray();
        float[] got = logits(half, f.prompts().get(0));
        double scale = maxAbs(ref);
        double diff = maxAbsDiff(got, ref);
        assertTrue(scale > 1.0, "reference logits unexpectedly flat");
        assertTrue(diff <= relBound * scale, String.format("%s %s: max|Δlogits| = %.4g > %.2g · max|logit| (%.4g)",
                name, dtype, diff, relBound, scale));
        System.out.printf("%s %s: max|Δlogits| = %.4g = %.4f · max|logit|%n", name, dtype, diff, diff / scale);
    }

    /** The bounds above catch a wrong conversion: byte-swapped BF16, and F16 bits labelled BF16. */
    @ParameterizedTest
    @ValueSource(strings = {"swapped", "f16-as-bf16"})
    void misconvertedWeightsFailTheBound(String how) throws IOException {
        Fixture f = Fixtures.named("qwen3_5");
        Checkpoint original = Checkpoint.open(f.dir());
        Path dir = Files.createDirectories(tmp.resolve("wrong-" + how));
        copy(f.dir().resolve(Checkpoint.CONFIG), dir.resolve(Checkpoint.CONFIG));
        List<Tensor> converted = new ArrayList<>();
        for (String t : original.tensorNames()) {
            TensorEntry e = original.tensor(t);
            if (how.equals("swapped")) {
                byte[] b = SafetensorsWriter.bf16Bytes(e.toFloatArray());
                for (int i = 0; i < b.length; i += 2) {
                    byte x = b[i];
                    b[i] = b[i + 1];
                    b[i + 1] = x;
                }
                converted.add(new Tensor(t, "BF16", e.shape(), b));
            } else {
                converted.add(SafetensorsWriter.toF16(e).withDtype("BF16"));
            }
        }
        SafetensorsWriter.write(dir.resolve(Checkpoint.SINGLE), converted);
        float[] ref = f.logits(0).toFloatArray();
        float[] got = logits(Checkpoint.open(dir), f.prompts().get(0));
        double diff = maxAbsDiff(got, ref);
        // NaN/inf logits count as failing too: !(diff <= bound)
        assertFalse(diff <= BF16_REL_BOUND * maxAbs(ref), how + ": max|Δlogits| = " + diff);
        System.out.printf("qwen3_5 %s: max|Δlogits| = %.4g = %.4f · max|logit|%n", how, diff, diff / maxAbs(ref));
    }

    // ---------------------------------------------------------------- decoders

    @Test
    void f16ToFloatKnownBitPatterns() {
        assertEquals(1.0f, DType.f16ToFloat((short) 0x3c00));
        assertEquals(-2.0f, DType.f16ToFloat((short) 0xc000));
        assertEquals(65504.0f, DType.f16ToFloat((short) 0x7bff));
        assertEquals(0x1p-24f, DType.f16ToFloat((short) 0x0001));          // smallest subnormal
        assertEquals(1023 * 0x1p-24f, DType.f16ToFloat((short) 0x03ff));   // largest subnormal
        assertEquals(0x1p-14f, DType.f16ToFloat((short) 0x0400));          // smallest normal
        assertEquals(-0x1p-24f, DType.f16ToFloat((short) 0x8001));
        assertEquals(0.5f + 0x1p-11f, DType.f16ToFloat((short) 0x3801));
        assertEquals(0.333251953125f, DType.f16ToFloat((short) 0x3555));
        assertEquals(Float.floatToRawIntBits(0.0f), Float.floatToRawIntBits(DType.f16ToFloat((short) 0x0000)));
        assertEquals(Float.floatToRawIntBits(-0.0f), Float.floatToRawIntBits(DType.f16ToFloat((short) 0x8000)));
        assertEquals(Float.POSITIVE_INFINITY, DType.f16ToFloat((short) 0x7c00));
        assertEquals(Float.NEGATIVE_INFINITY, DType.f16ToFloat((short) 0xfc00));
        assertTrue(Float.isNaN(DType.f16ToFloat((short) 0x7e00)));
        assertTrue(Float.isNaN(DType.f16ToFloat((short) 0x7c01)));
        assertTrue(Float.isNaN(DType.f16ToFloat((short) 0xfe00)));
    }

    @Test
    void bf16ToFloatKnownBitPatterns() {
        assertEquals(1.0f, DType.bf16ToFloat((short) 0x3f80));
        assertEquals(-2.0f, DType.bf16ToFloat((short) 0xc000));
        assertEquals(3.140625f, DType.bf16ToFloat((short) 0x4049));
        assertEquals(Float.intBitsToFloat(0x7f7f0000), DType.bf16ToFloat((short) 0x7f7f));   // largest finite
        assertEquals(0x1p-126f, DType.bf16ToFloat((short) 0x0080));                            // smallest normal
        assertEquals(0x1p-133f, DType.bf16ToFloat((short) 0x0001));                            // smallest subnormal
        assertEquals(Float.floatToRawIntBits(-0.0f), Float.floatToRawIntBits(DType.bf16ToFloat((short) 0x8000)));
        assertEquals(Float.POSITIVE_INFINITY, DType.bf16ToFloat((short) 0x7f80));
        assertEquals(Float.NEGATIVE_INFINITY, DType.bf16ToFloat((short) 0xff80));
        assertTrue(Float.isNaN(DType.bf16ToFloat((short) 0x7fc0)));
    }

    /** Every half bit pattern decodes to a value that the writer encodes back to the same bits. */
    @Test
    void everyHalfBitPatternRoundTrips() {
        for (int bits = 0; bits < 0x10000; bits++) {
            int h = bits;
            float f16 = DType.f16ToFloat((short) h);
            float bf16 = DType.bf16ToFloat((short) h);
            if (!Float.isNaN(f16)) {
                assertEquals(h, SafetensorsWriter.toF16(f16) & 0xffff, () -> "F16 " + Integer.toHexString(h));
                assertEquals(f16, nearestF16(f16), () -> "F16 " + Integer.toHexString(h));
            } else {
                assertTrue(Float.isNaN(DType.f16ToFloat(SafetensorsWriter.toF16(f16))));
            }
            if (!Float.isNaN(bf16)) {
                assertEquals(h, SafetensorsWriter.toBf16(bf16) & 0xffff, () -> "BF16 " + Integer.toHexString(h));
            } else {
                assertTrue(Float.isNaN(DType.bf16ToFloat(SafetensorsWriter.toBf16(bf16))));
            }
        }
    }

    @Test
    void writerRoundsToNearestEven() {
        // BF16 near 1: spacing 2^-7
        assertEquals(0x3f80, SafetensorsWriter.toBf16(1f + 0x1p-8f) & 0xffff);           // tie → even (down)
        assertEquals(0x3f82, SafetensorsWriter.toBf16(1f + 3 * 0x1p-8f) & 0xffff);       // tie → even (up)
        assertEquals(0x3f81, SafetensorsWriter.toBf16(1f + 0x1p-8f + 0x1p-20f) & 0xffff); // above the tie
        assertEquals(0x7f80, SafetensorsWriter.toBf16(Float.MAX_VALUE) & 0xffff);         // rounds up to inf
        // F16 near 1: spacing 2^-10
        assertEquals(0x3c00, SafetensorsWriter.toF16(1f + 0x1p-11f) & 0xffff);
        assertEquals(0x3c02, SafetensorsWriter.toF16(1f + 3 * 0x1p-11f) & 0xffff);
        assertEquals(0x3c01, SafetensorsWriter.toF16(1f + 0x1p-11f + 0x1p-20f) & 0xffff);
        assertEquals(0x7bff, SafetensorsWriter.toF16(65519f) & 0xffff);
        assertEquals(0x7c00, SafetensorsWriter.toF16(65520f) & 0xffff);                   // tie → inf
        assertEquals(0x0000, SafetensorsWriter.toF16(0x1p-25f) & 0xffff);                 // tie → 0
        assertEquals(0x0001, SafetensorsWriter.toF16(0x1p-25f + 0x1p-35f) & 0xffff);
        assertEquals(0x0002, SafetensorsWriter.toF16(3 * 0x1p-25f) & 0xffff);             // tie → even
        assertEquals(0x0400, SafetensorsWriter.toF16(0x1p-14f - 0x1p-26f) & 0xffff);      // up into the normals
        assertEquals(0x8000, SafetensorsWriter.toF16(-1e-30f) & 0xffff);
    }

    @Test
    void writerProducesTheSafetensorsLayout() throws IOException {
        Path file = tmp.resolve("w.safetensors");
        SafetensorsWriter.write(file, List.of(
                Tensor.f32("a", new int[] {2, 3}, new float[] {1, 2, 3, 4, 5, 6}),
                new Tensor("b", "BF16", new int[] {2}, SafetensorsWriter.bf16Bytes(new float[] {1.5f, -3f})),
                new Tensor("c", "F16", new int[] {1}, SafetensorsWriter.f16Bytes(new float[] {0.25f}))));
        byte[] raw = Files.readAllBytes(file);
        long headerLen = ByteBuffer.wrap(raw, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
        assertEquals(0, headerLen % 8);
        assertEquals(8 + headerLen + 24 + 4 + 2, raw.length);
        String header = new String(raw, 8, (int) headerLen, StandardCharsets.UTF_8);
        assertTrue(header.startsWith("{\"__metadata__\":{\"format\":\"pt\"}"), header);
        assertEquals(header.stripTrailing() + " ".repeat(header.length() - header.stripTrailing().length()), header);

        SafetensorsFile sf = SafetensorsFile.open(file);
        assertEquals(Map.of("format", "pt"), sf.metadata());
        assertArrayEquals(new float[] {1, 2, 3, 4, 5, 6}, sf.tensors().get("a").toFloatArray());
        assertArrayEquals(new int[] {2, 3}, sf.tensors().get("a").shape());
        assertEquals(DType.BF16, sf.tensors().get("b").dtype());
        assertArrayEquals(new float[] {1.5f, -3f}, sf.tensors().get("b").toFloatArray());
        assertEquals(DType.F16, sf.tensors().get("c").dtype());
        assertArrayEquals(new float[] {0.25f}, sf.tensors().get("c").toFloatArray());

        SafetensorsWriter.write(file, List.of(Tensor.f32("x", new int[] {1}, new float[] {7})), false);
        assertTrue(SafetensorsFile.open(file).metadata().isEmpty());
        assertArrayEquals(new float[] {7}, SafetensorsFile.open(file).tensors().get("x").toFloatArray());
    }

    // ---------------------------------------------------------------- helpers

    /** RNE to bfloat16 (8 significant bits; float32's exponent range), computed in exact double arithmetic. */
    static float nearestBf16(float x) {
        if (!Float.isFinite(x)) {
            return x;
        }
        double q = Math.scalb(1.0, Math.max(Math.getExponent(x), Float.MIN_EXPONENT) - 7);
        return (float) (Math.rint(x / q) * q);
    }

    /** RNE to IEEE half (11 significant bits, min normal exponent -14, overflow to ±inf), in exact double arithmetic. */
    static float nearestF16(float x) {
        if (!Float.isFinite(x)) {
            return x;
        }
        double q = Math.scalb(1.0, Math.max(Math.getExponent(x), -14) - 10);
        double r = Math.rint(x / q) * q;
        if (Math.abs(r) > 65504.0) {
            return x > 0 ? Float.POSITIVE_INFINITY : Float.NEGATIVE_INFINITY;
        }
        return (float) r;
    }

    static float[] logits(Checkpoint checkpoint, int[] prompt) {
        CpuBackend backend = new CpuBackend();
        HybridModel model = HybridModel.load(checkpoint, backend);
        return backend.download(model.newSequence(prompt.length).forward(prompt, true));
    }

    static double maxAbsDiff(float[] a, float[] b) {
        assertEquals(a.length, b.length);
        double m = 0;
        for (int i = 0; i < a.length; i++) {
            m = Math.max(m, Math.abs((double) a[i] - b[i]));
        }
        return m;
    }

    static double maxAbs(float[] a) {
        double m = 0;
        for (float v : a) {
            m = Math.max(m, Math.abs(v));
        }
        return m;
    }

    static void copy(Path from, Path to) throws IOException {
        Files.write(to, Files.readAllBytes(from));   // a writable copy (the fixtures are read-only)
    }
}
