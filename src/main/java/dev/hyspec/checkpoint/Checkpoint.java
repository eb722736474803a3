package dev.hyspec.checkpoint;

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * A Hugging Face checkpoint folder: {@code config.json} plus the weights, either one
 * {@code model.safetensors} or shards listed by {@code model.safetensors.index.json}.
 * Every tensor stays memory-mapped.
 */
public final class Checkpoint {
    public static final String CONFIG = "config.json";
    public static final String SINGLE = "model.safetensors";
    public static final String INDEX = "model.safetensors.index.json";
    // Python's json writes non-finite floats as bare Infinity / NaN; accept them.
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();

    private final Path dir;
    private final JsonNode config;
    private final Map<String, TensorEntry> tensors;

    private Checkpoint(Path dir, JsonNode config, Map<String, TensorEntry> tensors) {
        this.dir = dir;
        this.config = config;
        this.tensors = tensors;
    }

    public static Checkpoint open(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new CheckpointException("checkpoint folder not found: " + dir);
        }
        JsonNode config = readJson(dir.resolve(CONFIG));
        Map<String, TensorEntry> tensors = new LinkedHashMap<>();
        Path single = dir.resolve(SINGLE);
        Path index = dir.resolve(INDEX);
        if (Files.isRegularFile(index)) {
            JsonNode weightMap = readJson(index).path("weight_map");
            if (!weightMap.isObject() || weightMap.isEmpty()) {
                throw new CheckpointException(index + " has no \"weight_map\" object");
            }
            Set<String> shards = new TreeSet<>();
            weightMap.fields().forEachRemaining(e -> shards.add(e.getValue().asText()));
            Map<String, SafetensorsFile> opened = new LinkedHashMap<>();
            for (String shard : shards) {
                if (!Files.isRegularFile(dir.resolve(shard))) {
                    throw new CheckpointException("missing file: " + shard + ", listed in " + INDEX
                            + ", is not in " + dir);
                }
                opened.put(shard, SafetensorsFile.open(dir.resolve(shard)));
            }
            weightMap.fields().forEachRemaining(e -> {
                TensorEntry t = opened.get(e.getValue().asText()).tensors().get(e.getKey());
                if (t == null) {
                    throw new CheckpointException("tensor " + e.getKey() + " is listed in " + INDEX + " under "
                            + e.getValue().asText() + ", but that shard does not contain it");
                }
                tensors.put(e.getKey(), t);
            });
        } else if (Files.isRegularFile(single)) {
            tensors.putAll(SafetensorsFile.open(single).tensors());
        } else {
            throw new CheckpointException("missing file: " + dir + " has neither " + SINGLE + " nor " + INDEX);
        }
        return new Checkpoint(dir, config, Collections.unmodifiableMap(tensors));
    }

    static JsonNode readJson(Path file) {
        if (!Files.isRegularFile(file)) {
            throw new CheckpointException("missing file: " + file);
        }
        try {
            JsonNode node = JSON.readTree(Files.readString(file));
            if (node == null || !node.isObject()) {
                throw new CheckpointException("malformed " + file.getFileName() + ": expected a JSON object");
            }
            return node;
        } catch (IOException e) {
            throw new CheckpointException("malformed " + file.getFileName() + " in " + file.getParent() + ": "
                    + e.getMessage().lines().findFirst().orElse(""), e);
        }
    }

    public Path dir() {
        return dir;
    }

    /** The parsed {@code config.json}. */
    public JsonNode config() {
        return config;
    }

    public Set<String> tensorNames() {
        return tensors.keySet();
    }

    public Optional<TensorEntry> find(String name) {
        return Optional.ofNullable(tensors.get(name));
    }

    /** The tensor {@code name}; a missing one is a {@link CheckpointException} naming it. */
    public TensorEntry tensor(String name) {
        TensorEntry t = tensors.get(name);
        if (t == null) {
            throw new CheckpointException("tensor " + name + " is missing from the checkpoint in " + dir);
        }
        return t;
    }

    /** The tensor {@code name}, which must have exactly the shape {@code expected}. */
    public TensorEntry tensor(String name, int... expected) {
        return tensor(name).requireShape(expected);
    }
}
