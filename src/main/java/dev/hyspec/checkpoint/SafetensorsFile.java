package dev.hyspec.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A memory-mapped {@code .safetensors} file: an 8-byte little-endian header length, a JSON header
 * ({@code name -> {dtype, shape, data_offsets}}), then the raw tensor bytes. Each tensor is mapped
 * as its own read-only region, so no tensor is read onto the heap and none may exceed 2 GiB.
 */
public final class SafetensorsFile {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path path;
    private final Map<String, TensorEntry> tensors;
    private final Map<String, String> metadata;

    private SafetensorsFile(Path path, Map<String, TensorEntry> tensors, Map<String, String> metadata) {
        this.path = path;
        this.tensors = tensors;
        this.metadata = metadata;
    }

    public static SafetensorsFile open(Path path) {
        if (!Files.isRegularFile(path)) {
            throw new CheckpointException("missing file: " + path);
        }
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            long size = ch.size();
            if (size < 8) {
                throw new CheckpointException(path + " is not a safetensors file (only " + size + " bytes)");
            }
            ByteBuffer lenBuf = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            ch.read(lenBuf, 0);
            long headerLen = lenBuf.getLong(0);
            if (headerLen <= 0 || headerLen > 100_000_000L) {
                throw new CheckpointException(path + " is not a safetensors file (header length " + headerLen + ")");
            }
            if (8 + headerLen > size) {
                throw new CheckpointException(path + " is truncated: its header needs " + (8 + headerLen)
                        + " bytes, but the file has only " + size);
            }
            ByteBuffer header = ByteBuffer.allocate((int) headerLen);
            ch.read(header, 8);
            JsonNode root;
            try {
                root = JSON.readTree(header.array());
            } catch (IOException e) {
                throw new CheckpointException(path + " has a malformed safetensors header: " + e.getMessage(), e);
            }
            long dataStart = 8 + headerLen;
            Map<String, TensorEntry> tensors = new LinkedHashMap<>();
            Map<String, String> metadata = new LinkedHashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                if (e.getKey().equals("__metadata__")) {
                    e.getValue().fields().forEachRemaining(m -> metadata.put(m.getKey(), m.getValue().asText()));
                    continue;
                }
                tensors.put(e.getKey(), entry(path, ch, dataStart, size, e.getKey(), e.getValue()));
            }
            return new SafetensorsFile(path, Collections.unmodifiableMap(tensors), metadata);
        } catch (IOException e) {
            throw new CheckpointException("cannot read " + path + ": " + e.getMessage(), e);
        }
    }

    private static TensorEntry entry(Path path, FileChannel ch, long dataStart, long fileSize, String name, JsonNode node)
            throws IOException {
        String dtypeName = node.path("dtype").asText();
        DType dtype = DType.fromSafetensors(dtypeName).orElseThrow(() -> new CheckpointException(
                "tensor " + name + " in " + path.getFileName() + " has unsupported dtype " + dtypeName
                        + " (supported: F32, BF16, F16)"));
        JsonNode shapeNode = node.path("shape");
        int[] shape = new int[shapeNode.size()];
        long elements = 1;
        for (int i = 0; i < shape.length; i++) {
            shape[i] = shapeNode.get(i).asInt();
            elements *= shape[i];
        }
        JsonNode offsets = node.path("data_offsets");
        long begin = offsets.path(0).asLong(-1);
        long end = offsets.path(1).asLong(-1);
        if (begin < 0 || end < begin) {
            throw new CheckpointException("tensor " + name + " in " + path.getFileName()
                    + " has invalid data offsets " + offsets);
        }
        if (dataStart + end > fileSize) {
            throw new CheckpointException(path.getFileName() + " is truncated: tensor " + name + " has data offsets ["
                    + begin + ", " + end + "), but the file holds only " + (fileSize - dataStart) + " bytes of data");
        }
        if (end - begin != elements * dtype.bytes()) {
            throw new CheckpointException("tensor " + name + " in " + path.getFileName() + " holds " + (end - begin)
                    + " bytes, but its shape and dtype need " + elements * dtype.bytes());
        }
        if (end - begin > Integer.MAX_VALUE) {
            throw new CheckpointException("tensor " + name + " is larger than 2 GiB, which hyspec cannot map");
        }
        ByteBuffer data = ch.map(FileChannel.MapMode.READ_ONLY, dataStart + begin, end - begin)
                .order(ByteOrder.LITTLE_ENDIAN);
        return new TensorEntry(name, dtype, shape, data);
    }

    public Path path() {
        return path;
    }

    public Map<String, TensorEntry> tensors() {
        return tensors;
    }

    public Map<String, String> metadata() {
        return metadata;
    }
}
