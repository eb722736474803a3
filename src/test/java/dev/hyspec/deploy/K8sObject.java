package dev.hyspec.deploy;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One Kubernetes object of a manifest file, as SnakeYAML parsed it (nested maps and lists), with
 * the lookups the deploy checks need. A missing required field fails the test with its path.
 *
 * @param file the manifest file it came from
 * @param body the parsed object
 */
record K8sObject(Path file, Map<String, Object> body) {

    String kind() {
        return string(body, "kind");
    }

    String name() {
        return string(body, "metadata", "name");
    }

    /** The folder applied together with it ({@code kubectl apply -f folder}). */
    Path folder() {
        return file.getParent();
    }

    @Override
    public String toString() {
        return kind() + " " + name() + " (" + file + ")";
    }

    /** A Deployment's pod template labels. */
    Map<String, Object> podLabels() {
        return mapOrEmpty(body, "spec", "template", "metadata", "labels");
    }

    /** A Deployment's pod template annotations. */
    Map<String, Object> podAnnotations() {
        return mapOrEmpty(body, "spec", "template", "metadata", "annotations");
    }

    /** A Deployment's pod spec. */
    Map<String, Object> podSpec() {
        return map(body, "spec", "template", "spec");
    }

    /** A Deployment's container named {@code name}. */
    Map<String, Object> container(String name) {
        return list(podSpec(), "containers").stream()
                .filter(c -> name.equals(c.get("name")))
                .findFirst()
                .orElseGet(() -> fail(this + " has no container named " + name));
    }

    /** A Deployment's pod volume named {@code name}. */
    Map<String, Object> volume(String name) {
        return list(podSpec(), "volumes").stream()
                .filter(v -> name.equals(v.get("name")))
                .findFirst()
                .orElseGet(() -> fail(this + " has no volume named " + name));
    }

    /** The node at {@code path} under {@code node}, or null where any step is missing. */
    static Object at(Map<String, Object> node, String... path) {
        Object current = node;
        for (String step : path) {
            if (!(current instanceof Map<?, ?> m)) {
                return null;
            }
            current = m.get(step);
        }
        return current;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> map(Map<String, Object> node, String... path) {
        Object value = at(node, path);
        if (value instanceof Map<?, ?>) {
            return (Map<String, Object>) value;
        }
        return fail("expected a mapping at " + String.join(".", path) + " in " + node);
    }

    static Map<String, Object> mapOrEmpty(Map<String, Object> node, String... path) {
        return at(node, path) == null ? Map.of() : map(node, path);
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> list(Map<String, Object> node, String... path) {
        Object value = at(node, path);
        if (value instanceof List<?>) {
            return (List<Map<String, Object>>) value;
        }
        return fail("expected a list at " + String.join(".", path) + " in " + node);
    }

    /** A scalar as text: YAML reads {@code 8000} as a number and {@code "8000"} as a string, Kubernetes takes either. */
    static String string(Map<String, Object> node, String... path) {
        Object value = at(node, path);
        if (value == null || value instanceof Map<?, ?> || value instanceof List<?>) {
            return fail("expected a scalar at " + String.join(".", path) + " in " + node);
        }
        return Objects.toString(value);
    }
}
