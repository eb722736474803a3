package dev.hyspec.deploy;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.engine.Engine;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The manifests against the running application rather than against themselves: every probe path
 * of every Deployment under deploy/k8s answers 200, and every rollback strategy the ConfigMaps name
 * is one the application has.
 */
@QuarkusTest
class DeployProbesTest {
    private final Manifests manifests = Manifests.load(Manifests.ROOT);

    @Inject
    Engine engine;

    @Test
    void everyProbePathAnswers200() {
        Set<String> paths = new TreeSet<>();
        for (K8sObject d : manifests.ofKind("Deployment")) {
            Map<String, Object> container = d.container(Manifests.CONTAINER);
            for (String field : container.keySet()) {
                if (field.endsWith("Probe")) {
                    paths.add(K8sObject.string(container, field, "httpGet", "path"));
                }
            }
        }
        assertFalse(paths.isEmpty(), "no probe under " + Manifests.ROOT);
        for (String path : paths) {
            given().get(path).then().statusCode(200);
        }
    }

    @Test
    void everyNamedStrategyIsOneTheApplicationHas() {
        Set<String> strategies = engine.strategies().keySet();
        for (K8sObject cm : manifests.ofKind("ConfigMap")) {
            Properties config = Manifests.properties(cm);
            Set<String> named = new TreeSet<>();
            if (config.containsKey("hyspec.rollback.strategy")) {
                named.add(config.getProperty("hyspec.rollback.strategy"));
            }
            for (String pair : config.getProperty("hyspec.rollback.ab", "").split(",")) {
                if (!pair.isBlank()) {
                    named.add(pair.split("=")[0].trim());
                }
            }
            assertTrue(strategies.containsAll(named), cm + " names " + named + "; the application has " + strategies);
        }
    }
}
