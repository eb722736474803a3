package dev.hyspec.testing;

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.hyspec.checkpoint.SafetensorsFile;
import dev.hyspec.checkpoint.TensorEntry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Reference checkpoints with logits and greedy rollouts computed by transformers: every folder
 * under {@code ../shared/fixtures/hf-tiny} (or {@code -Dhyspec.fixtures=DIR}), the project's own
 * {@code src/test/fixtures}, the shipped models under {@code models} (the embedded default model
 * carries its references beside its weights), plus every fixture
 * folder under each path of the environment variable {@code HYSPEC_FIXTURES_EXTRA} (colon-separated).
 */
public final class Fixtures {
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();

    private Fixtures() {}

    /** One fixture folder: a checkpoint plus {@code reference.json} and {@code reference.safetensors}. */
    public record Fixture(Path dir, List<int[]> prompts, List<int[]> greedy) {
        public String name() {
            return dir.getFileName().toString();
        }

        /** {@code logits_i}: float32 {@code [len(prompt_i), vocab]}. */
        public TensorEntry logits(int i) {
            return SafetensorsFile.open(dir.resolve("reference.safetensors")).tensors().get("logits_" + i);
        }

        @Override
        public String toString() {
            return name();
        }
    }

    public static Path hfTinyRoot() {
        return Path.of(System.getProperty("hyspec.fixtures", "../shared/fixtures/hf-tiny")).toAbsolutePath().normalize();
    }

    /** The hf-tiny fixtures, the project's, the shipped models', and those under {@code HYSPEC_FIXTURES_EXTRA}. */
    public static List<Fixture> all() {
        List<Fixture> out = new ArrayList<>(under(hfTinyRoot()));
        out.addAll(under(Path.of("src/test/fixtures")));
        out.addAll(under(Path.of("models")));
        String extra = System.getenv("HYSPEC_FIXTURES_EXTRA");
        if (extra != null && !extra.isBlank()) {
            for (String p : extra.split(":")) {
                if (!p.isBlank()) {
                    out.addAll(under(Path.of(p)));
                }
            }
        }
        if (out.isEmpty()) {
            throw new IllegalStateException("no fixtures found under " + hfTinyRoot());
        }
        return out;
    }

    public static Fixture named(String name) {
        return load(hfTinyRoot().resolve(name));
    }

    /** The folder itself if it is a fixture, else every fixture folder below it. */
    public static List<Fixture> under(Path root) {
        if (Files.isRegularFile(root.resolve("reference.json"))) {
            return List.of(load(root));
        }
        if (!Files.isDirectory(root)) {
            return List.of();
        }
        try (Stream<Path> s = Files.walk(root)) {
            return s.filter(p -> Files.isRegularFile(p.resolve("reference.json"))).sorted().map(Fixtures::load).toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Fixture load(Path dir) {
        try {
            JsonNode ref = JSON.readTree(dir.resolve("reference.json").toFile());
            List<int[]> prompts = new ArrayList<>();
            ref.get("prompts").forEach(p -> prompts.add(ints(p)));
            List<int[]> greedy = new ArrayList<>();
            ref.get("greedy").forEach(g -> greedy.add(ints(g.get("cached"))));
            return new Fixture(dir, prompts, greedy);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static int[] ints(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = array.get(i).asInt();
        }
        return out;
    }
}
