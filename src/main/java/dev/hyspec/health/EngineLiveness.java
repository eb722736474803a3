package dev.hyspec.health;

import dev.hyspec.engine.Engine;
import dev.hyspec.engine.ModelRegistry;
import jakarta.enterprise.context.ApplicationScoped;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Liveness;

/**
 * Alive while the engine thread runs and keeps going round its loop: it does so at least every
 * 100 ms when idle and once per step when busy, so a heartbeat older than
 * {@value #STALL_SECONDS} s means a hung step.
 */
@Liveness
@ApplicationScoped
public class EngineLiveness implements HealthCheck {
    static final long STALL_SECONDS = 60;

    private final ModelRegistry registry;
    private final Engine engine;

    public EngineLiveness(ModelRegistry registry, Engine engine) {
        this.registry = registry;
        this.engine = engine;
    }

    @Override
    public HealthCheckResponse call() {
        if (registry.model().isEmpty()) {
            // nothing to run: the process itself is fine (readiness tells that no model is served)
            return HealthCheckResponse.named("engine").up().withData("model", "none").build();
        }
        long ageMs = engine.heartbeatAgeNanos() / 1_000_000;
        boolean ok = engine.alive() && ageMs < STALL_SECONDS * 1000;
        return HealthCheckResponse.named("engine").status(ok).withData("thread", engine.alive() ? "running" : "stopped")
                .withData("last_loop_ms_ago", ageMs).withData("in_flight", engine.inFlight()).build();
    }
}
