package dev.hyspec.health;

import dev.hyspec.engine.ModelRegistry;
import jakarta.enterprise.context.ApplicationScoped;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;

/** Ready once a model is loaded on its backend. */
@Readiness
@ApplicationScoped
public class ModelReadiness implements HealthCheck {
    private final ModelRegistry registry;

    public ModelReadiness(ModelRegistry registry) {
        this.registry = registry;
    }

    @Override
    public HealthCheckResponse call() {
        return registry.model()
                .map(m -> HealthCheckResponse.named("model").up().withData("model", m.id())
                        .withData("architecture", m.model().config().architecture().hfName())
                        .withData("backend", m.model().backend().name()).build())
                .orElseGet(() -> HealthCheckResponse.named("model").down()
                        .withData("reason", "no model loaded (set hyspec.model.path)").build());
    }
}
