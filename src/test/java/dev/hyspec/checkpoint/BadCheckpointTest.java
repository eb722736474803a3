package dev.hyspec.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.model.HybridModel;
import dev.hyspec.testing.Fixtures;
import dev.hyspec.testing.SafetensorsWriter;
import dev.hyspec.testing.SafetensorsWriter.Tensor;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every broken checkpoint fails with one {@link CheckpointException} whose message names what is
 * wrong: the folder, file, config key or tensor (and, for shapes and dtypes, what was expected and
 * found). Each case starts from a copy of a reference fixture and breaks one thing; loading goes all
 * the way through {@code HybridModel.load(Checkpoint.open(dir), new CpuBackend())}, since some
 * problems (architecture, keys, missing tensors, shapes) only show when the model is built.
 */
class BadCheckpointTest {
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();
    private static final String OUT_PROJ = "backbone.layers.0.mixer.out_proj.weight";   // mamba2 [128, 256]

    @TempDir
    Path tmp;

    /** The unbroken copies load, so every failure below is due to the one thing each test breaks. */
    @ParameterizedTest
    @ValueSource(strings = {"mamba2", "nemotron_h", "qwen3_5", "qwen3_next"})
    void intactCopyLoads(String fixture) throws IOException {
        assertNotNull(load(copyFixture(fixture)));
        assertNotNull(load(shardedCopy(fixture)));
    }

    // ---------------------------------------------------------------- files and folders

    @Test
    void folderMissing() {
        Path dir = tmp.resolve("no-such-checkpoint");
        expectFailure(dir, "no-such-checkpoint", "not found");
    }

    @Test
    void configMissing() throws IOException {
        Path dir = copyFixture("mamba2");
        Files.delete(dir.resolve("config.json"));
        expectFailure(dir, "config.json", "missing");
    }

    @Test
    void weightsMissing() throws IOException {
        Path dir = copyFixture("mamba2");
        Files.delete(dir.resolve("model.safetensors"));
        expectFailure(dir, "model.safetensors", "model.safetensors.index.json");
    }

    @Test
    void indexListsAShardThatDoesNotExist() throws IOException {
        Path dir = shardedCopy("nemotron_h");
        Files.delete(dir.resolve("model-00002-of-00003.safetensors"));
        expectFailure(dir, "model-00002-of-00003.safetensors", "model.safetensors.index.json");
    }

    @Test
    void indexMapsATensorToAShardThatLacksIt() throws IOException {
        Path dir = shardedCopy("nemotron_h");
        ObjectNode index = (ObjectNode) JSON.readTree(dir.resolve(Checkpoint.INDEX).toFile());
        ObjectNode weightMap = (ObjectNode) index.get("weight_map");
        String tensor = "backbone.embeddings.weight";   // first tensor: in shard 1
        assertEquals("model-00001-of-00003.safetensors", weightMap.get(tensor).asText());
        weightMap.put(tensor, "model-00003-of-00003.safetensors");
        JSON.writeValue(dir.resolve(Checkpoint.INDEX).toFile(), index);
        expectFailure(dir, tensor, "model-00003-of-00003.safetensors", "does not contain it");
    }

    @Test
    void indexNotValidJson() throws IOException {
        Path dir = shardedCopy("qwen3_5");
        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"metadata\": {\"total_size\": 12}, \"weight_map\": {");
        expectFailure(dir, "model.safetensors.index.json", "malformed");
    }

    @Test
    void indexWithoutWeightMap() throws IOException {
        Path dir = shardedCopy("qwen3_5");
        Files.writeString(dir.resolve(Checkpoint.INDEX), "{\"metadata\": {\"total_size\": 12}}");
        expectFailure(dir, "model.safetensors.index.json", "weight_map");
    }

    // ---------------------------------------------------------------- config.json

    @Test
    void unknownArchitecture() throws IOException {
        Path dir = copyFixture("qwen3_5");
        editConfig(dir, c -> c.putArray("architectures").add("LlamaForCausalLM"));
        expectFailure(dir, "LlamaForCausalLM", "Mamba2ForCausalLM", "NemotronHForCausalLM",
                "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM");
    }

    @Test
    void architecturesMissing() throws IOException {
        Path dir = copyFixture("qwen3_5");
        editConfig(dir, c -> c.remove("architectures"));
        expectFailure(dir, "config.json", "architectures", "Qwen3_5ForCausalLM");
    }

    @Test
    void configNotValidJson() throws IOException {
        Path dir = copyFixture("mamba2");
        String text = Files.readString(dir.resolve("config.json"));
        Files.writeString(dir.resolve("config.json"), text.substring(0, text.length() / 2));
        expectFailure(dir, "config.json", "malformed");
    }

    @Test
    void configNotAnObject() throws IOException {
        Path dir = copyFixture("mamba2");
        Files.writeString(dir.resolve("config.json"), "[1, 2, 3]");
        expectFailure(dir, "config.json", "malformed");
    }

    @Test
    void configEmpty() throws IOException {
        Path dir = copyFixture("mamba2");
        Files.writeString(dir.resolve("config.json"), "");
        expectFailure(dir, "config.json", "malformed");
    }

    @Test
    void configKeyOfTheWrongType() throws IOException {
        Path dir = copyFixture("mamba2");
        editConfig(dir, c -> c.put("hidden_size", "big"));
        expectFailure(dir, "config.json", "hidden_size", "integer", "big");
    }

    @Test
    void configKeyOfTheWrongTypeInAQwenConfig() throws IOException {
        Path dir = copyFixture("qwen3_next");
        editConfig(dir, c -> c.put("num_experts_per_tok", 1.5));
        expectFailure(dir, "config.json", "num_experts_per_tok", "1.5");
    }

    @Test
    void requiredConfigKeyMissing() throws IOException {
        Path dir = copyFixture("mamba2");
        editConfig(dir, c -> c.remove("num_heads"));
        expectFailure(dir, "config.json", "num_heads", "missing");
    }

    @Test
    void requiredConfigKeyMissingInANemotronConfig() throws IOException {
        Path dir = copyFixture("nemotron_h");
        editConfig(dir, c -> c.remove("ssm_state_size"));
        expectFailure(dir, "config.json", "ssm_state_size", "missing");
    }

    // ---------------------------------------------------------------- tensors

    @ParameterizedTest
    @ValueSource(strings = {"backbone.layers.1.mixer.in_proj.weight", "backbone.layers.2.mixer.D",
            "backbone.norm_f.weight", "lm_head.weight"})
    void tensorMissing(String tensor) throws IOException {
        Path dir = copyFixture("mamba2");
        rewriteWeights(dir, ts -> {
            assertTrue(ts.removeIf(t -> t.name().equals(tensor)), tensor);
            return ts;
        });
        expectFailure(dir, tensor, "missing");
    }

    @Test
    void tensorMissingFromAQwenCheckpoint() throws IOException {
        Path dir = copyFixture("qwen3_next");
        String tensor = "model.layers.3.self_attn.q_norm.weight";
        rewriteWeights(dir, ts -> {
            assertTrue(ts.removeIf(t -> t.name().equals(tensor)), tensor);
            return ts;
        });
        expectFailure(dir, tensor, "missing");
    }

    @Test
    void tensorOfTheWrongShape() throws IOException {
        Path dir = copyFixture("mamba2");
        rewriteWeights(dir, ts -> replace(ts, OUT_PROJ, t -> {
            assertEquals("[128, 256]", java.util.Arrays.toString(t.shape()));
            return t.withShape(256, 128).withData(transpose(t.data(), 128, 256));
        }));
        expectFailure(dir, OUT_PROJ, "[256, 128]", "[128, 256]");
    }

    @Test
    void vectorOfTheWrongShape() throws IOException {
        Path dir = copyFixture("qwen3_5");
        String tensor = "model.layers.0.input_layernorm.weight";
        rewriteWeights(dir, ts -> replace(ts, tensor, t -> t.withShape(t.shape()[0] / 2, 2)));
        expectFailure(dir, tensor, "shape", "expected");
    }

    @ParameterizedTest
    @ValueSource(strings = {"F64", "I32", "I64", "F8_E4M3", "whatever"})
    void unsupportedDtype(String dtype) throws IOException {
        Path dir = copyFixture("mamba2");
        String tensor = "backbone.layers.0.mixer.A_log";
        int width = switch (dtype) {
            case "F64", "I64" -> 8;
            case "F8_E4M3" -> 1;
            default -> 4;
        };
        rewriteWeights(dir, ts -> replace(ts, tensor, t -> t.withDtype(dtype).withData(new byte[8 * width])));
        expectFailure(dir, tensor, dtype, "unsupported dtype", "model.safetensors");
    }

    @Test
    void tensorBytesDoNotMatchItsShape() throws IOException {
        Path dir = copyFixture("mamba2");
        String tensor = "backbone.layers.0.mixer.D";
        rewriteWeights(dir, ts -> replace(ts, tensor, t -> t.withShape(16)));
        expectFailure(dir, tensor, "32 bytes", "64");
    }

    @ParameterizedTest
    @ValueSource(doubles = {0.0, 0.000003, 0.001, 0.5, 0.9999})
    void truncatedSafetensorsFile(double keep) throws IOException {
        Path dir = copyFixture("mamba2");
        Path file = dir.resolve("model.safetensors");
        long size = Files.size(file);
        try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
            raf.setLength((long) (size * keep));
        }
        expectFailure(dir, "model.safetensors");
    }

    @Test
    void truncatedInsideTheHeader() throws IOException {
        Path dir = copyFixture("mamba2");
        Path file = dir.resolve("model.safetensors");
        try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
            raf.setLength(100);
        }
        expectFailure(dir, "model.safetensors", "truncated");
    }

    @Test
    void truncatedInsideTheData() throws IOException {
        Path dir = copyFixture("mamba2");
        Path file = dir.resolve("model.safetensors");
        try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
            raf.setLength(Files.size(file) - 1);
        }
        expectFailure(dir, "model.safetensors", "truncated", "lm_head.weight");
    }

    @Test
    void truncatedShard() throws IOException {
        Path dir = shardedCopy("qwen3_next");
        Path file = dir.resolve("model-00002-of-00003.safetensors");
        try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
            raf.setLength(Files.size(file) / 2);
        }
        expectFailure(dir, "model-00002-of-00003.safetensors", "truncated");
    }

    @Test
    void headerNotJson() throws IOException {
        Path dir = copyFixture("mamba2");
        Path file = dir.resolve("model.safetensors");
        byte[] raw = Files.readAllBytes(file);
        raw[8] = '[';   // the header's opening brace
        raw[9] = '!';
        Files.write(file, raw);
        expectFailure(dir, "model.safetensors", "header");
    }

    @Test
    void absurdHeaderLength() throws IOException {
        Path dir = copyFixture("mamba2");
        Path file = dir.resolve("model.safetensors");
        byte[] raw = Files.readAllBytes(file);
        ByteBuffer.wrap(raw).order(ByteOrder.LITTLE_ENDIAN).putLong(0, -5);
        Files.write(file, raw);
        expectFailure(dir, "model.safetensors", "header length");
    }

    // ---------------------------------------------------------------- helpers

    private static HybridModel load(Path dir) {
        return HybridModel.load(Checkpoint.open(dir), new CpuBackend());
    }

    /** Loading fails with exactly one CheckpointException whose message contains every fragment. */
    private static void expectFailure(Path dir, String... fragments) {
        CheckpointException e = assertThrows(CheckpointException.class, () -> load(dir));
        String message = e.getMessage();
        assertNotNull(message);
        for (String fragment : fragments) {
            assertTrue(message.contains(fragment), "message should name \"" + fragment + "\": " + message);
        }
    }

    /** A writable copy of a fixture's config.json and model.safetensors. */
    private Path copyFixture(String name) throws IOException {
        Path from = Fixtures.named(name).dir();
        Path dir = Files.createDirectories(tmp.resolve(name));
        for (String f : List.of(Checkpoint.CONFIG, Checkpoint.SINGLE)) {
            Files.write(dir.resolve(f), Files.readAllBytes(from.resolve(f)));
        }
        return dir;
    }

    /** The fixture's weights split into three shards plus an index, as transformers saves large models. */
    private Path shardedCopy(String name) throws IOException {
        Path from = Fixtures.named(name).dir();
        Path dir = Files.createDirectories(tmp.resolve(name + "-sharded"));
        Files.write(dir.resolve(Checkpoint.CONFIG), Files.readAllBytes(from.resolve(Checkpoint.CONFIG)));
        Map<String, TensorEntry> tensors = new LinkedHashMap<>(SafetensorsFile.open(from.resolve(Checkpoint.SINGLE)).tensors());
        SafetensorsWriter.writeSharded(dir, tensors, 3);
        return dir;
    }

    private static void editConfig(Path dir, Consumer<ObjectNode> edit) throws IOException {
        Path file = dir.resolve(Checkpoint.CONFIG);
        ObjectNode config = (ObjectNode) JSON.readTree(file.toFile());
        edit.accept(config);
        JSON.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), config);
    }

    private static void rewriteWeights(Path dir, UnaryOperator<List<Tensor>> edit) throws IOException {
        Path file = dir.resolve(Checkpoint.SINGLE);
        List<Tensor> tensors = new ArrayList<>(SafetensorsWriter.read(file));
        List<Tensor> edited = edit.apply(tensors);
        Path tmpFile = dir.resolve("model.safetensors.tmp");
        SafetensorsWriter.write(tmpFile, edited);
        Files.move(tmpFile, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }

    private static List<Tensor> replace(List<Tensor> tensors, String name, UnaryOperator<Tensor> change) {
        boolean found = false;
        for (int i = 0; i < tensors.size(); i++) {
            if (tensors.get(i).name().equals(name)) {
                tensors.set(i, change.apply(tensors.get(i)));
                found = true;
            }
        }
        assertTrue(found, name);
        return tensors;
    }

    /** Row-major float32 [rows, cols] → [cols, rows]. */
    private static byte[] transpose(byte[] data, int rows, int cols) {
        ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer out = ByteBuffer.allocate(data.length).order(ByteOrder.LITTLE_ENDIAN);
        for (int c = 0; c < cols; c++) {
            for (int r = 0; r < rows; r++) {
                out.putFloat(in.getFloat((r * cols + c) * 4));
            }
        }
        return out.array();
    }
}
