package dev.hyspec.metrics;

import dev.hyspec.engine.Engine;
import dev.hyspec.engine.FinishReason;
import dev.hyspec.engine.ModelRegistry;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Meter.MeterProvider;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * Request-level {@code hyspec_*} meters, recorded by the HTTP layer as a request moves through it:
 * outcomes, time to first token, inter-token latency, end-to-end latency and token counts, each
 * tagged with the model and the rollback strategy that served the request.
 */
@ApplicationScoped
public class RequestMetrics {
    private static final Set<String> OUTCOMES = outcomes();

    private final ModelRegistry models;
    private final Set<String> strategies;
    private final MeterProvider<Counter> requests;
    private final MeterProvider<Timer> timeToFirstToken;
    private final MeterProvider<Timer> interToken;
    private final MeterProvider<Timer> e2e;
    private final MeterProvider<Counter> promptTokens;
    private final MeterProvider<Counter> generationTokens;

    public RequestMetrics(MeterRegistry registry, ModelRegistry models, Engine engine) {
        this.models = models;
        this.strategies = Set.copyOf(engine.strategies().keySet());
        requests = Counter.builder("hyspec.requests")
                .description("Requests by outcome: a finish reason, or rejected / overloaded when refused before running")
                .withRegistry(registry);
        timeToFirstToken = timer("hyspec.time.to.first.token", "From a request's arrival to its first output token",
                Buckets.TIME_TO_FIRST_TOKEN, registry);
        interToken = timer("hyspec.inter.token.latency",
                "Between two successive output tokens (or token groups) of one request", Buckets.INTER_TOKEN, registry);
        e2e = timer("hyspec.e2e.request.latency", "From a request's arrival to its finish", Buckets.E2E,
                registry);
        promptTokens = Counter.builder("hyspec.prompt.tokens").description("Prompt tokens of finished requests")
                .withRegistry(registry);
        generationTokens = Counter.builder("hyspec.generation.tokens")
                .description("Generated tokens of finished requests").withRegistry(registry);
    }

    /** A request was refused before running (bad input or overload): outcome "rejected" / "overloaded". */
    public void rejected(String outcome) {
        requests.withTags(MetricTags.MODEL, model(), MetricTags.STRATEGY, MetricTags.NO_STRATEGY,
                MetricTags.OUTCOME, outcome(outcome)).increment();
    }

    /** The first output token of a request reached the client path, nanos after the request arrived. */
    public void firstToken(String strategy, long nanosSinceArrival) {
        timeToFirstToken.withTags(MetricTags.MODEL, model(), MetricTags.STRATEGY, strategy(strategy))
                .record(nanosSinceArrival, TimeUnit.NANOSECONDS);
    }

    /** Time between two successive output tokens (or token groups) of one request. */
    public void interToken(String strategy, long nanos) {
        interToken.withTags(MetricTags.MODEL, model(), MetricTags.STRATEGY, strategy(strategy))
                .record(nanos, TimeUnit.NANOSECONDS);
    }

    /** A request finished: outcome is the OpenAI finish reason ("stop", "length", "abort", "error"). */
    public void finished(String strategy, String outcome, int promptTokens, int generatedTokens, long e2eNanos) {
        String model = model();
        String s = strategy(strategy);
        requests.withTags(MetricTags.MODEL, model, MetricTags.STRATEGY, s, MetricTags.OUTCOME, outcome(outcome))
                .increment();
        e2e.withTags(MetricTags.MODEL, model, MetricTags.STRATEGY, s).record(e2eNanos, TimeUnit.NANOSECONDS);
        this.promptTokens.withTags(MetricTags.MODEL, model, MetricTags.STRATEGY, s).increment(promptTokens);
        this.generationTokens.withTags(MetricTags.MODEL, model, MetricTags.STRATEGY, s).increment(generatedTokens);
    }

    private static MeterProvider<Timer> timer(String name, String description, Duration[] buckets,
                                              MeterRegistry registry) {
        return Timer.builder(name).description(description).serviceLevelObjectives(buckets).withRegistry(registry);
    }

    private String model() {
        return MetricTags.model(models);
    }

    /** A strategy the engine knows, {@code none}, or {@code other}: a stray value must not add series. */
    private String strategy(String strategy) {
        if (strategy == null) {
            return MetricTags.NO_STRATEGY;
        }
        return strategies.contains(strategy) || strategy.equals(MetricTags.NO_STRATEGY) ? strategy : MetricTags.OTHER;
    }

    private static String outcome(String outcome) {
        return OUTCOMES.contains(outcome) ? outcome : MetricTags.OTHER;
    }

    /** The finish reasons' wire names plus the two refusals. */
    private static Set<String> outcomes() {
        Set<String> s = Arrays.stream(FinishReason.values()).map(FinishReason::wireName).collect(Collectors.toSet());
        s.add("rejected");
        s.add("overloaded");
        return Set.copyOf(s);
    }
}
