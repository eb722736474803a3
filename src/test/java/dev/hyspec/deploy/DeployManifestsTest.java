package dev.hyspec.deploy;

import static dev.hyspec.deploy.Manifests.CONTAINER;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.hyspec.config.HyspecConfig;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.ReplayStrategy;
import io.quarkus.runtime.configuration.DurationConverter;
import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Checks deploy/k8s against the application it deploys: container and probe ports against
 * {@code quarkus.http.port}, probe paths against SmallRye Health's endpoints, every ConfigMap key
 * and value against {@link HyspecConfig}, GPUs against the configured backend, the grace period
 * against the drain timeout, and the A/B pair's wiring. {@link DeployProbesTest} asks the running
 * application for the probe paths.
 */
class DeployManifestsTest {
    /** Each probe and the SmallRye Health endpoint it must ask. */
    static final Map<String, String> PROBE_PATHS = Map.of(
            "startupProbe", "/q/health/started",
            "livenessProbe", "/q/health/live",
            "readinessProbe", "/q/health/ready");
    static final String METRICS_PATH = "/q/metrics";
    static final String GPU = "nvidia.com/gpu";
    static final Set<String> STRATEGIES = Set.of(ReplayStrategy.ID, IntermediateCopyStrategy.ID);
    /**
     * The words the string-typed keys accept (the README's configuration table; cuda is the GPU
     * backend the manifests are written for). Typed keys are checked by their Java type instead.
     */
    static final Map<String, Set<String>> CHOICES = Map.of(
            "hyspec.backend", Set.of("cpu", "cuda"),
            "hyspec.rollback.strategy", STRATEGIES,
            "hyspec.spec.method", Set.of("ngram", "none"),
            "hyspec.state-dtype", Set.of("float32", "bfloat16", "float16"));
    /** Kubernetes' default when a pod spec does not set it. */
    static final long DEFAULT_GRACE_SECONDS = 30;
    /** Loading a large checkpoint takes minutes; a shorter startup budget restarts the pod in a loop. */
    static final Duration MIN_STARTUP_BUDGET = Duration.ofMinutes(5);

    static Manifests manifests;
    static Map<String, ConfigKeys.Key> keys;
    static int httpPort;

    @BeforeAll
    static void load() throws IOException {
        manifests = Manifests.load(Manifests.ROOT);
        keys = ConfigKeys.of(HyspecConfig.class);
        Properties app = new Properties();
        try (Reader reader = Files.newBufferedReader(Path.of("src", "main", "resources", "application.properties"))) {
            app.load(reader);
        }
        // The container runs the prod profile.
        String port = app.getProperty("%prod.quarkus.http.port", app.getProperty("quarkus.http.port"));
        assertNotNull(port, "application.properties sets no quarkus.http.port");
        httpPort = Integer.parseInt(port);
    }

    @Test
    void configKeysFollowTheMappingNames() {
        assertEquals("max-num-batched-tokens", ConfigKeys.kebabCase("maxNumBatchedTokens"));
        assertTrue(keys.containsKey("hyspec.model.path"));
        assertTrue(keys.containsKey("hyspec.scheduler.max-num-seqs"));
        assertTrue(keys.containsKey("hyspec.state-pool.prefill-layout"));
        assertEquals("HYSPEC_PREFIX_CACHE_ENABLED", keys.get("hyspec.prefix-cache.enabled").envName());
        assertFalse(keys.containsKey("hyspec.scheduler"), "groups are prefixes, not keys");
    }

    @Test
    void bothLayoutsHaveADeploymentAndAService() {
        for (Path folder : List.of(Manifests.ROOT, Manifests.ROOT.resolve("ab"))) {
            assertFalse(manifests.ofKind("Deployment", folder).isEmpty(), "no Deployment in " + folder);
            assertEquals(1, manifests.ofKind("Service", folder).size(), "one Service in " + folder);
        }
    }

    @Test
    void probesAskTheHealthEndpointsOnTheHttpPort() {
        for (K8sObject d : manifests.ofKind("Deployment")) {
            Map<String, Object> container = d.container(CONTAINER);
            assertEquals(httpPort, containerPort(container, "http"), d + ": port http vs quarkus.http.port");
            PROBE_PATHS.forEach((probe, path) -> {
                Map<String, Object> httpGet = K8sObject.map(container, probe, "httpGet");
                assertEquals(path, K8sObject.string(httpGet, "path"), d + " " + probe);
                assertEquals(httpPort, containerPort(container, K8sObject.string(httpGet, "port")), d + " " + probe);
            });
            Map<String, Object> startup = K8sObject.map(container, "startupProbe");
            Duration budget = Duration.ofSeconds((long) intOr(startup, "periodSeconds", 10)
                    * intOr(startup, "failureThreshold", 3));
            assertTrue(budget.compareTo(MIN_STARTUP_BUDGET) >= 0,
                    d + ": the startup probe gives up after " + budget + ", less than " + MIN_STARTUP_BUDGET);
        }
    }

    @Test
    void servicesRouteToTheHttpPort() {
        for (K8sObject s : manifests.ofKind("Service")) {
            Map<String, Object> selector = K8sObject.map(s.body(), "spec", "selector");
            List<K8sObject> selected = manifests.ofKind("Deployment", s.folder()).stream()
                    .filter(d -> Manifests.selects(selector, d.podLabels())).toList();
            assertFalse(selected.isEmpty(), s + " selects no pod of " + s.folder());
            for (Map<String, Object> port : K8sObject.list(s.body(), "spec", "ports")) {
                String target = K8sObject.string(port, "targetPort");
                for (K8sObject d : selected) {
                    assertEquals(httpPort, containerPort(d.container(CONTAINER), target), s + " → " + d);
                }
            }
        }
    }

    @Test
    void deploymentsOwnOnlyTheirPods() {
        List<K8sObject> deployments = manifests.ofKind("Deployment");
        for (K8sObject d : deployments) {
            Map<String, Object> selector = K8sObject.map(d.body(), "spec", "selector", "matchLabels");
            assertTrue(Manifests.selects(selector, d.podLabels()), d + ": selector does not match its pods");
            for (K8sObject other : deployments) {
                assertTrue(other == d || !Manifests.selects(selector, other.podLabels()),
                        d + " would also select the pods of " + other);
            }
        }
    }

    @Test
    void podsAnnounceTheirMetricsEndpoint() {
        for (K8sObject d : manifests.ofKind("Deployment")) {
            Map<String, Object> annotations = d.podAnnotations();
            assertEquals("true", annotations.get("prometheus.io/scrape"), d + ": prometheus.io/scrape");
            assertEquals(String.valueOf(httpPort), String.valueOf(annotations.get("prometheus.io/port")),
                    d + ": prometheus.io/port");
            assertEquals(METRICS_PATH, annotations.get("prometheus.io/path"), d + ": prometheus.io/path");
        }
    }

    @Test
    void configMapsHoldValidHyspecConfiguration() {
        List<K8sObject> configMaps = manifests.ofKind("ConfigMap");
        assertFalse(configMaps.isEmpty(), "no ConfigMap under " + Manifests.ROOT);
        for (K8sObject cm : configMaps) {
            // Only the properties file is mounted where Quarkus reads it; another key would be ignored.
            assertEquals(Set.of(Manifests.CONFIG_FILE), K8sObject.map(cm.body(), "data").keySet(), cm + ": data keys");
            Properties properties = Manifests.properties(cm);
            for (String name : properties.stringPropertyNames()) {
                ConfigKeys.Key key = keys.get(name);
                if (key == null) {
                    fail(cm + ": " + name + " is not a configuration key of hyspec (HyspecConfig)");
                }
                checkValue(cm, key, properties.getProperty(name));
            }
        }
    }

    @Test
    void hyspecContainersReadTheirConfigMap() {
        Set<String> envNames = keys.values().stream().map(ConfigKeys.Key::envName).collect(Collectors.toSet());
        for (K8sObject d : manifests.ofKind("Deployment")) {
            assertNotNull(manifests.configMap(d));
            // Environment variables override the file; any that sets hyspec configuration must name a real key.
            for (Map<String, Object> env : listOr(d.container(CONTAINER), "env")) {
                String name = K8sObject.string(env, "name");
                assertTrue(!name.startsWith("HYSPEC_") || envNames.contains(name),
                        d + ": " + name + " is not a configuration key of hyspec");
            }
        }
    }

    @Test
    void modelPathLiesOnTheModelClaim() {
        for (K8sObject d : manifests.ofKind("Deployment")) {
            String modelPath = manifests.config(d).getProperty("hyspec.model.path");
            assertNotNull(modelPath, d + ": its ConfigMap sets no hyspec.model.path");
            Map<String, Object> mount = K8sObject.list(d.container(CONTAINER), "volumeMounts").stream()
                    .filter(m -> Path.of(modelPath).startsWith(K8sObject.string(m, "mountPath")))
                    .findFirst()
                    .orElseGet(() -> fail(d + ": hyspec.model.path=" + modelPath + " is on no mounted volume"));
            Map<String, Object> volume = d.volume(K8sObject.string(mount, "name"));
            manifests.resolve(d, "PersistentVolumeClaim",
                    K8sObject.string(volume, "persistentVolumeClaim", "claimName"));
        }
    }

    @Test
    void cudaPodsGetExactlyOneGpu() {
        for (K8sObject d : manifests.ofKind("Deployment")) {
            boolean cuda = setting(manifests.config(d), "hyspec.backend").equals("cuda");
            Map<String, Object> resources = K8sObject.mapOrEmpty(d.container(CONTAINER), "resources");
            Object limit = K8sObject.mapOrEmpty(resources, "limits").get(GPU);
            // The engine thread drives one device; more would sit idle, none would fail at startup.
            assertEquals(cuda ? "1" : null, limit == null ? null : String.valueOf(limit), d + ": " + GPU + " limit");
            Object request = K8sObject.mapOrEmpty(resources, "requests").get(GPU);
            assertTrue(request == null || request.equals(limit), d + ": " + GPU + " request must equal its limit");
        }
    }

    @Test
    void gracePeriodOutlastsTheDrainTimeout() {
        for (K8sObject d : manifests.ofKind("Deployment")) {
            Duration drain = DurationConverter.parseDuration(setting(manifests.config(d), "hyspec.drain-timeout"));
            long grace = intOr(d.podSpec(), "terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS);
            assertTrue(grace > drain.toSeconds(),
                    d + ": terminationGracePeriodSeconds " + grace + " does not outlast hyspec.drain-timeout " + drain);
        }
    }

    @Test
    void abPairPinsEachStrategyBehindOneService() {
        Path ab = Manifests.ROOT.resolve("ab");
        Map<String, K8sObject> byStrategy = new HashMap<>();
        Map<String, Properties> configs = new HashMap<>();
        for (K8sObject d : manifests.ofKind("Deployment", ab)) {
            Properties config = manifests.config(d);
            String strategy = setting(config, "hyspec.rollback.strategy");
            assertNull(byStrategy.put(strategy, d), "two A/B Deployments pin " + strategy);
            assertEquals("hyspec-" + strategy, d.name());
            assertEquals("hyspec", d.podLabels().get("app"), d + ": label app");
            assertEquals(strategy, d.podLabels().get("variant"), d + ": label variant");
            // A split inside a pod would mix both strategies into each half of the comparison.
            assertFalse(config.containsKey("hyspec.rollback.ab"), d + ": an A/B half must not split again");
            config.remove("hyspec.rollback.strategy");
            configs.put(strategy, config);
        }
        assertEquals(STRATEGIES, byStrategy.keySet(), "the A/B Deployments' strategies");
        assertEquals(configs.get(ReplayStrategy.ID), configs.get(IntermediateCopyStrategy.ID),
                "the A/B halves must differ in the rollback strategy only");

        K8sObject service = manifests.ofKind("Service", ab).get(0);
        assertEquals(Map.of("app", "hyspec"), K8sObject.map(service.body(), "spec", "selector"));
        byStrategy.values().forEach(d -> assertTrue(
                Manifests.selects(K8sObject.map(service.body(), "spec", "selector"), d.podLabels()),
                service + " does not select " + d));
    }

    /** Checks a value against its key's Java type, or against the words a string key accepts. */
    private static void checkValue(K8sObject cm, ConfigKeys.Key key, String value) {
        String where = cm + ": " + key.name() + "=" + value;
        Class<?> type = key.type();
        try {
            if (type == int.class || type == Integer.class) {
                Integer.parseInt(value);
            } else if (type == boolean.class || type == Boolean.class) {
                assertTrue(value.equals("true") || value.equals("false"), where + " is not true or false");
            } else if (type == Duration.class) {
                assertNotNull(DurationConverter.parseDuration(value), where);
            } else if (type.isEnum()) {
                assertTrue(Arrays.stream(type.getEnumConstants()).anyMatch(c -> c.toString().equalsIgnoreCase(value)),
                        where + " is not one of " + Arrays.toString(type.getEnumConstants()));
            } else if (key.name().equals("hyspec.rollback.ab")) {
                checkWeights(where, value);
            } else if (CHOICES.containsKey(key.name())) {
                assertTrue(CHOICES.get(key.name()).contains(value), where + " is not one of " + CHOICES.get(key.name()));
            }
        } catch (IllegalArgumentException e) {
            fail(where + " does not convert to " + type.getSimpleName() + ": " + e.getMessage());
        }
    }

    /** {@code replay=90,intermediate-copy=10}: real strategies, non-negative integer weights. */
    private static void checkWeights(String where, String value) {
        for (String pair : value.split(",")) {
            String[] parts = pair.split("=");
            assertEquals(2, parts.length, where + ": expected strategy=weight pairs");
            assertTrue(STRATEGIES.contains(parts[0].trim()), where + ": " + parts[0] + " is not a strategy");
            assertTrue(Integer.parseInt(parts[1].trim()) >= 0, where + ": negative weight");
        }
    }

    /** A key's value in {@code config}, else its {@code @WithDefault}. */
    private static String setting(Properties config, String key) {
        return config.getProperty(key, keys.get(key).defaultValue().orElseGet(() -> fail(key + " has no default")));
    }

    /** The port number a probe or Service names, by number or by the container's port name. */
    private static int containerPort(Map<String, Object> container, String port) {
        if (port.chars().allMatch(Character::isDigit)) {
            return Integer.parseInt(port);
        }
        return K8sObject.list(container, "ports").stream()
                .filter(p -> port.equals(p.get("name")))
                .map(p -> Integer.parseInt(K8sObject.string(p, "containerPort")))
                .findFirst()
                .orElseGet(() -> fail("container " + container.get("name") + " has no port named " + port));
    }

    private static long intOr(Map<String, Object> node, String field, long otherwise) {
        Object value = node.get(field);
        return value == null ? otherwise : Long.parseLong(String.valueOf(value));
    }

    private static List<Map<String, Object>> listOr(Map<String, Object> node, String field) {
        return node.get(field) == null ? List.of() : K8sObject.list(node, field);
    }
}
