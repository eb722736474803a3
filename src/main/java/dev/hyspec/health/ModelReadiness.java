package dev.hyspec.health;

import dev.hyspec.engine.Engine;
import dev.hyspec.engine.ModelRegistry;
import jakarta.enterprise.context.ApplicationScoped;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;

/** Ready once a model is loaded on its backend and the engine thread is running, until shutdown starts draining. */
@Readiness
@ApplicationScoped
public class ModelReadiness implements HealthCheck {
    private final ModelRegistry registry;
    private final Engine engine;

    public ModelReadiness(ModelRegistry registry, Engine engine) {
        this.registry = registry;
        this.engine = engine;
    }

    @Override
    public HealthCheckResponse call() {
        if (registry.model().isPresent() && engine.draining()) {
            return HealthCheckResponse.named("model").down().withData("reason", "draining: the server is shutting down")
                    .build();
        }
        if (registry.model().isPresent() && !engine.ready()) {
            return HealthCheckResponse.named("model").down().withData("reason", "the engine thread is not running").build();
        }
        return registry.model()
                .map(m -> HealthCheckResponse.named("model").up().withData("model", m.id())
                        .withData("architecture", m.model().config().architecture().hfName())
                        .withData("backend", m.model().backend().name()).build())
                .orElseGet(() -> HealthCheckResponse.named("model").down()
                        .withData("reason", "no model loaded (set hyspec.model.path)").build());
    }
}
