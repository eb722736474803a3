package dev.hyspec.health;

import dev.hyspec.config.HyspecConfig;
import dev.hyspec.engine.Engine;
import dev.hyspec.engine.ModelRegistry;
import jakarta.enterprise.context.ApplicationScoped;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Startup;

/** Started once the configured model is loaded and the engine thread runs (a startup probe gives model loading time). */
@Startup
@ApplicationScoped
public class ModelStartup implements HealthCheck {
    private final HyspecConfig config;
    private final ModelRegistry registry;
    private final Engine engine;

    public ModelStartup(HyspecConfig config, ModelRegistry registry, Engine engine) {
        this.config = config;
        this.registry = registry;
        this.engine = engine;
    }

    @Override
    public HealthCheckResponse call() {
        boolean configured = config.model().path().isPresent();
        boolean started = !configured || (registry.model().isPresent() && engine.alive());
        return HealthCheckResponse.named("model-loaded").status(started)
                .withData("model", registry.model().map(m -> m.id()).orElse("none")).build();
    }
}
