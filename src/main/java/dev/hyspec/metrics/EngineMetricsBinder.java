package dev.hyspec.metrics;

import dev.hyspec.engine.Engine;
import dev.hyspec.engine.EngineMetrics;
import dev.hyspec.engine.EngineObserver;
import dev.hyspec.engine.ModelRegistry;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.quarkus.runtime.StartupEvent;
import jakarta.annotation.Priority;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.inject.Instance;
import jakarta.interceptor.Interceptor;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

/**
 * Publishes the engine's work as {@code hyspec_*} meters: step time and batch shape and, per
 * rollback strategy, drafts, accepted drafts (also per draft position) and commit time, all fed by
 * the engine thread through {@link EngineObserver}; and gauges and counters over
 * {@link Engine#lastMetrics()}, so a scrape never waits on the engine thread.
 */
@ApplicationScoped
public class EngineMetricsBinder implements EngineObserver {
    private static final String[] POSITIONS = MetricTags.positions();

    private final MeterRegistry registry;
    private final ModelRegistry models;
    // Engine composes every EngineObserver when it starts; looking it up lazily keeps the two beans
    // out of each other's constructors.
    private final Instance<Engine> engines;
    private final Map<String, VerifyMeters> byStrategy = new ConcurrentHashMap<>();
    private Tags modelTags;
    private Timer step;
    private DistributionSummary batchRows;
    private DistributionSummary batchTokens;

    public EngineMetricsBinder(MeterRegistry registry, ModelRegistry models, Instance<Engine> engines) {
        this.registry = registry;
        this.models = models;
        this.engines = engines;
    }

    /** The meters of one strategy, looked up once so that a verified row costs one map lookup. */
    private record VerifyMeters(Counter drafted, Counter accepted, Timer commit, Counter[] positionDrafted,
                                Counter[] positionAccepted) {}

    /**
     * Registers every meter. Runs after {@link ModelRegistry} has loaded the model (its id tags every
     * meter) and before the engine starts (a lower priority than its observer), so the engine
     * thread finds the meters in place.
     */
    void register(@Observes @Priority(Interceptor.Priority.APPLICATION + 900) StartupEvent event) {
        modelTags = Tags.of(MetricTags.MODEL, MetricTags.model(models));
        step = Timer.builder("hyspec.step")
                .description("Wall time of one engine step: schedule, forward, verify, commit")
                .tags(modelTags).serviceLevelObjectives(Buckets.STEP).register(registry);
        batchRows = DistributionSummary.builder("hyspec.batch.size")
                .description("Rows of one engine step: generate (decode and verify) rows plus prefill chunks")
                .tags(modelTags).serviceLevelObjectives(Buckets.BATCH_ROWS).register(registry);
        batchTokens = DistributionSummary.builder("hyspec.batch.tokens")
                .description("Tokens of one engine step: prefill, decode and draft tokens together")
                .tags(modelTags).serviceLevelObjectives(Buckets.BATCH_TOKENS).register(registry);

        Engine engine = engines.get();
        gauge("hyspec.queue.length", "Requests waiting for admission", engine, m -> m.waiting);
        gauge("hyspec.running.requests", "Requests running (admitted, holding a state slot)", engine, m -> m.running);
        gauge("hyspec.state.pool.slots.used", "Recurrent-state slots in use, prefix-cache checkpoints included",
                engine, m -> m.slotsUsed);
        gauge("hyspec.state.pool.slots.total", "Recurrent-state slots of the pool", engine, m -> m.slotsTotal);
        gauge("hyspec.state.pool.bytes", "Bytes of recurrent state the pool holds (conv, SSM, strategy buffers)",
                engine, m -> m.stateBytes);
        gauge("hyspec.kv.cache.pages.used", "KV-cache pages in use", engine, m -> m.kvPagesUsed);
        gauge("hyspec.kv.cache.pages.total", "KV-cache pages of the pool", engine, m -> m.kvPagesTotal);
        counter("hyspec.prefix.cache.queries", "Prefix-cache lookups", engine, m -> m.prefixQueries);
        counter("hyspec.prefix.cache.hits", "Prefix-cache lookups that found a checkpoint", engine,
                m -> m.prefixHits);
        counter("hyspec.prefix.cache.queried.tokens", "Prompt tokens looked up in the prefix cache", engine,
                m -> m.prefixQueriedTokens);
        counter("hyspec.prefix.cache.hit.tokens", "Prompt tokens the prefix cache served", engine,
                m -> m.prefixHitTokens);
        counter("hyspec.preemptions", "Requests preempted for want of KV pages (recomputed later)", engine,
                m -> m.preemptions);
        counter("hyspec.layout.conversions", "Recurrent-state layout conversions (KV <-> VK)", engine,
                m -> m.layoutConversions);
        for (String strategy : engine.strategies().keySet()) {
            Gauge.builder("hyspec.spec.acceptance.rate", () -> engine.lastMetrics()
                            .map(m -> Optional.ofNullable(m.strategies.get(strategy))
                                    .map(EngineMetrics.StrategyStats::acceptanceRate).orElse(0.0))
                            .orElse(Double.NaN))
                    .description("Accepted draft tokens over drafted ones since start")
                    .tags(modelTags).tag(MetricTags.STRATEGY, strategy).register(registry);
            byStrategy.computeIfAbsent(strategy, this::verifyMeters);
        }
    }

    @Override
    public void onStep(long nanos, int generateRows, int prefillRows, int tokens) {
        step.record(nanos, TimeUnit.NANOSECONDS);
        batchRows.record(generateRows + prefillRows);
        batchTokens.record(tokens);
    }

    @Override
    public void onVerified(String strategy, int drafts, int accepted, long commitNanos) {
        VerifyMeters m = byStrategy.computeIfAbsent(strategy, this::verifyMeters);
        m.drafted.increment(drafts);
        m.accepted.increment(accepted);
        m.commit.record(commitNanos, TimeUnit.NANOSECONDS);
        countPositions(m.positionDrafted, drafts);
        countPositions(m.positionAccepted, accepted);
    }

    /** Counts positions {@code 1…n} once each; those beyond {@link MetricTags#MAX_POSITION} go to the last counter. */
    private static void countPositions(Counter[] counters, int n) {
        for (int p = 1; p <= Math.min(n, MetricTags.MAX_POSITION); p++) {
            counters[p - 1].increment();
        }
        if (n > MetricTags.MAX_POSITION) {
            counters[MetricTags.MAX_POSITION].increment(n - MetricTags.MAX_POSITION);
        }
    }

    private VerifyMeters verifyMeters(String strategy) {
        Tags tags = modelTags.and(MetricTags.STRATEGY, strategy);
        Counter[] drafted = new Counter[POSITIONS.length];
        Counter[] accepted = new Counter[POSITIONS.length];
        for (int i = 0; i < POSITIONS.length; i++) {
            drafted[i] = Counter.builder("hyspec.spec.position.drafted")
                    .description("Verified rows that carried a draft at this position (1 = first draft)")
                    .tags(tags).tag(MetricTags.POSITION, POSITIONS[i]).register(registry);
            accepted[i] = Counter.builder("hyspec.spec.position.accepted")
                    .description("Verified rows whose draft at this position was accepted")
                    .tags(tags).tag(MetricTags.POSITION, POSITIONS[i]).register(registry);
        }
        return new VerifyMeters(
                Counter.builder("hyspec.spec.draft.tokens").description("Draft tokens proposed and verified")
                        .tags(tags).register(registry),
                Counter.builder("hyspec.spec.accepted.tokens").description("Draft tokens the verifier accepted")
                        .tags(tags).register(registry),
                Timer.builder("hyspec.rollback.commit")
                        .description("Commit of one verified row through the rollback strategy, the rollback "
                                + "of rejected drafts included")
                        .tags(tags).serviceLevelObjectives(Buckets.COMMIT).register(registry),
                drafted, accepted);
    }

    /** A gauge over the engine's last snapshot; NaN ("no data") before the engine has run. */
    private void gauge(String name, String description, Engine engine, ToDoubleFunction<EngineMetrics> value) {
        Gauge.builder(name, () -> engine.lastMetrics().map(value::applyAsDouble).orElse(Double.NaN))
                .description(description).tags(modelTags).register(registry);
    }

    /**
     * A monotonic counter over the engine's last snapshot; 0 before the engine has run. Micrometer
     * holds a function counter's object weakly: this bean, which the application context keeps.
     */
    private void counter(String name, String description, Engine engine, ToDoubleFunction<EngineMetrics> value) {
        FunctionCounter.builder(name, this, b -> engine.lastMetrics().map(value::applyAsDouble).orElse(0.0))
                .description(description).tags(modelTags).register(registry);
    }
}
