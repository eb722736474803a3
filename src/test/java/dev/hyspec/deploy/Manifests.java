package dev.hyspec.deploy;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.Reader;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import org.yaml.snakeyaml.Yaml;

/**
 * Every Kubernetes object under {@code deploy/k8s}, and how they refer to each other: which
 * ConfigMap a hyspec pod reads as its {@code application.properties}, which pods a Service selects.
 */
final class Manifests {
    /** Relative to the project root, the working directory of Maven's test runs. */
    static final Path ROOT = Path.of("deploy", "k8s");
    /** The name of hyspec's container in every pod. */
    static final String CONTAINER = "hyspec";
    /** Quarkus reads {@code config/application.properties} under the working directory, /app in the image. */
    static final String CONFIG_DIR = "/app/config";
    static final String CONFIG_FILE = "application.properties";

    private final List<K8sObject> objects;

    private Manifests(List<K8sObject> objects) {
        this.objects = objects;
    }

    /** Parses every {@code .yaml} and {@code .yml} file under {@code root}, every document of each. */
    static Manifests load(Path root) {
        List<K8sObject> objects = new ArrayList<>();
        try (Stream<Path> files = Files.walk(root)) {
            for (Path file : files.filter(f -> f.toString().endsWith(".yaml") || f.toString().endsWith(".yml"))
                    .sorted().toList()) {
                try (Reader reader = Files.newBufferedReader(file)) {
                    for (Object doc : new Yaml().loadAll(reader)) {
                        if (doc != null) {
                            objects.add(new K8sObject(file, asObject(file, doc)));
                        }
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new Manifests(objects);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asObject(Path file, Object doc) {
        if (doc instanceof Map<?, ?> map && map.containsKey("kind")) {
            return (Map<String, Object>) map;
        }
        return fail(file + " holds a YAML document that is not a Kubernetes object");
    }

    List<K8sObject> ofKind(String kind) {
        return objects.stream().filter(o -> o.kind().equals(kind)).toList();
    }

    List<K8sObject> ofKind(String kind, Path folder) {
        return ofKind(kind).stream().filter(o -> o.folder().equals(folder)).toList();
    }

    /**
     * The object {@code kind}/{@code name} that {@code from} refers to: in its own folder or a
     * parent one (the A/B pair shares the model claim of deploy/k8s).
     */
    K8sObject resolve(K8sObject from, String kind, String name) {
        return ofKind(kind).stream()
                .filter(o -> o.name().equals(name) && from.folder().startsWith(o.folder()))
                .findFirst()
                .orElseGet(() -> fail(from + " refers to " + kind + " " + name + ", which is not in "
                        + from.folder() + " or a parent folder"));
    }

    /** The ConfigMap that a Deployment's hyspec container reads as {@code config/application.properties}. */
    K8sObject configMap(K8sObject deployment) {
        Map<String, Object> mount = K8sObject.list(deployment.container(CONTAINER), "volumeMounts").stream()
                .filter(m -> CONFIG_DIR.equals(m.get("mountPath")))
                .findFirst()
                .orElseGet(() -> fail(deployment + " mounts nothing at " + CONFIG_DIR));
        Map<String, Object> volume = deployment.volume(K8sObject.string(mount, "name"));
        return resolve(deployment, "ConfigMap", K8sObject.string(volume, "configMap", "name"));
    }

    /** The properties of a ConfigMap's {@code application.properties}. */
    static Properties properties(K8sObject configMap) {
        Properties properties = new Properties();
        try {
            properties.load(new StringReader(K8sObject.string(configMap.body(), "data", CONFIG_FILE)));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return properties;
    }

    /** The configuration a Deployment's hyspec container runs with (its ConfigMap's properties). */
    Properties config(K8sObject deployment) {
        return properties(configMap(deployment));
    }

    /** Whether a label selector ({@code matchLabels} or a Service's {@code selector}) picks these pod labels. */
    static boolean selects(Map<String, Object> selector, Map<String, Object> podLabels) {
        return !selector.isEmpty() && podLabels.entrySet().containsAll(selector.entrySet());
    }
}
