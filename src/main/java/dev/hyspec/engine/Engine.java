package dev.hyspec.engine;

import dev.hyspec.config.HyspecConfig;
import dev.hyspec.state.LayoutPolicy;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.RollbackStrategy;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.subscription.MultiEmitter;
import jakarta.annotation.Priority;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.inject.Any;
import jakarta.enterprise.inject.Instance;
import dev.hyspec.sampling.TokenLogprob;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.jboss.logging.Logger;

/**
 * The engine bean: one dedicated platform thread owns the model, the pools and the backend and runs
 * {@link EngineCore} steps; everything else talks to it through a command queue. A request's tokens
 * leave through its own {@link Multi}; cancelling the subscription (a closed client connection)
 * aborts the request and frees what it held.
 */
@ApplicationScoped
public class Engine {
    private static final Logger LOG = Logger.getLogger(Engine.class);
    private static final long SNAPSHOT_INTERVAL_NANOS = 100_000_000L;

    private final ModelRegistry registry;
    private final HyspecConfig config;
    private final Instance<RollbackStrategy> strategyBeans;
    private final Instance<EngineObserver> observers;
    private final BlockingQueue<Runnable> commands = new LinkedBlockingQueue<>();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final int maxWaiting;
    private volatile EngineCore core;
    private volatile boolean stopping;
    private volatile boolean draining;
    private volatile long heartbeat = System.nanoTime();
    private volatile EngineMetrics snapshot;
    private long snapshotNanos;   // engine thread only
    private Thread thread;

    public Engine(ModelRegistry registry, HyspecConfig config, @Any Instance<RollbackStrategy> strategyBeans,
                  @Any Instance<EngineObserver> observers) {
        this.registry = registry;
        this.config = config;
        this.strategyBeans = strategyBeans;
        this.observers = observers;
        this.maxWaiting = config.scheduler().maxWaiting();
    }

    /** Runs after {@link ModelRegistry} has loaded the model (a later observer priority). */
    void onStart(@Observes @Priority(jakarta.interceptor.Interceptor.Priority.APPLICATION + 1000) StartupEvent event) {
        registry.model().ifPresent(m -> {
            EngineCore c = new EngineCore(m.model(), options(config), strategies());
            List<EngineObserver> list = new ArrayList<>();
            observers.forEach(list::add);
            c.setObserver(new EngineObserver() {
                @Override
                public void onStep(long nanos, int generateRows, int prefillRows, int tokens) {
                    list.forEach(o -> o.onStep(nanos, generateRows, prefillRows, tokens));
                }

                @Override
                public void onVerified(String strategy, int drafts, int accepted, long commitNanos) {
                    list.forEach(o -> o.onVerified(strategy, drafts, accepted, commitNanos));
                }
            });
            start(c);
        });
    }

    /** Every {@link RollbackStrategy} bean, by id. */
    public Map<String, RollbackStrategy> strategies() {
        Map<String, RollbackStrategy> map = new HashMap<>();
        for (RollbackStrategy s : strategyBeans) {
            map.put(s.id(), s);
        }
        return map;
    }

    /** The engine options the configuration asks for. */
    static EngineOptions options(HyspecConfig c) {
        LayoutPolicy layouts = null;
        if (c.statePool().prefillLayout().isPresent() || c.statePool().decodeLayout().isPresent()) {
            var prefill = c.statePool().prefillLayout().orElse(c.statePool().decodeLayout().orElseThrow());
            var decode = c.statePool().decodeLayout().orElse(prefill);
            layouts = new LayoutPolicy(prefill, decode);
        }
        int drafts = switch (c.spec().method()) {
            case "ngram" -> c.spec().numTokens();
            case "none" -> 0;
            default -> throw new IllegalArgumentException("hyspec.spec.method=" + c.spec().method()
                    + " is not supported; use ngram or none");
        };
        return new EngineOptions(c.scheduler().maxNumSeqs(), c.scheduler().maxNumBatchedTokens(),
                c.scheduler().maxModelLen(), c.statePool().slots(), c.kvCache().pageSize(), c.kvCache().pages(), drafts,
                c.spec().ngramMin(), c.spec().ngramMax(), c.rollback().strategy(),
                parseWeights(c.rollback().ab().orElse("")), c.prefixCache().enabled(), c.prefixCache().blockSize(),
                layouts);
    }

    /** Parses {@code replay=90,intermediate-copy=10}. */
    static Map<String, Integer> parseWeights(String spec) {
        Map<String, Integer> out = new LinkedHashMap<>();
        for (String part : spec.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            int eq = p.indexOf('=');
            try {
                if (eq <= 0) {
                    throw new NumberFormatException();
                }
                int w = Integer.parseInt(p.substring(eq + 1).trim());
                if (w < 0) {
                    throw new NumberFormatException();
                }
                out.put(p.substring(0, eq).trim(), w);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("hyspec.rollback.ab: expected strategy=weight pairs such as "
                        + "replay=90,intermediate-copy=10, got '" + spec + "'");
            }
        }
        return out;
    }

    /** Starts the engine thread over {@code engineCore}. */
    synchronized void start(EngineCore engineCore) {
        if (core != null) {
            throw new IllegalStateException("engine already started");
        }
        this.core = engineCore;
        thread = new Thread(this::loop, "hyspec-engine");
        thread.setDaemon(true);
        thread.start();
        LOG.infof("engine started: strategies %s (default %s), %d state slots, %d KV pages of %d, prefix cache %s",
                engineCore.strategyIds(), engineCore.options().defaultStrategy(), engineCore.options().stateSlots(),
                engineCore.options().kvPages(), engineCore.options().pageSize(),
                engineCore.options().prefixCaching() ? "on" : "off");
    }

    /**
     * Graceful shutdown: refuses new requests (readiness goes down), lets running and waiting ones
     * finish for up to {@code hyspec.drain-timeout}, then aborts what is left and stops the thread.
     */
    void onStop(@Observes ShutdownEvent event) {
        drain(config.drainTimeout());
        stopping = true;
        if (thread != null) {
            commands.add(() -> { });
            try {
                thread.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Stops taking requests (they get 503 and readiness goes down) and waits up to {@code timeout}
     * for the running and waiting ones to finish; returns how many are still in flight.
     */
    public int drain(java.time.Duration timeout) {
        draining = true;
        long deadline = System.nanoTime() + timeout.toNanos();
        while (alive() && inFlight.get() > 0 && System.nanoTime() < deadline) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        if (inFlight.get() > 0) {
            LOG.warnf("drain timeout: %d requests still in flight are aborted", inFlight.get());
        }
        return inFlight.get();
    }

    /** The engine thread runs and takes new requests (not draining). */
    public boolean ready() {
        return alive() && !draining;
    }

    /** The engine thread is running. */
    public boolean alive() {
        return core != null && thread != null && thread.isAlive();
    }

    public boolean draining() {
        return draining;
    }

    /** Nanoseconds since the engine loop last went round (it does at least every 100 ms when idle). */
    public long heartbeatAgeNanos() {
        return System.nanoTime() - heartbeat;
    }

    /** The counters as of at most ~100 ms ago (no call to the engine thread); empty before the engine runs. */
    public Optional<EngineMetrics> lastMetrics() {
        return Optional.ofNullable(snapshot);
    }

    /** Checks a request without queueing it; throws {@link InvalidRequestException} naming the field at fault. */
    public void validate(GenerationRequest r) {
        EngineCore c = requireCore();
        CompletableFuture<Void> done = new CompletableFuture<>();
        // validation reads engine state: run it on the engine thread
        commands.add(() -> {
            try {
                c.validate(r);
                done.complete(null);
            } catch (RuntimeException e) {
                done.completeExceptionally(e);
            }
        });
        try {
            done.get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            if (e.getCause() instanceof RuntimeException re) {
                throw re;
            }
            throw new IllegalStateException(e.getCause());
        } catch (Exception e) {
            throw new IllegalStateException("engine did not answer: " + e, e);
        }
    }

    /**
     * Submits a request; the stream emits an admission event (the request's strategy), its tokens as
     * they are produced and a last event with the finish reason, then completes. It fails before the
     * admission with {@link InvalidRequestException} (bad input) or {@link EngineUnavailableException}
     * (overloaded or draining). Cancelling the stream aborts the request.
     */
    public Multi<TokenEvent> generate(GenerationRequest r) {
        EngineCore c = requireCore();
        return Multi.createFrom().emitter((MultiEmitter<? super TokenEvent> em) -> {
            if (draining) {
                em.fail(new EngineUnavailableException("draining", "the server is shutting down; retry on another replica",
                        5));
                return;
            }
            int limit = core.options().maxNumSeqs() + maxWaiting;
            if (inFlight.incrementAndGet() > limit) {
                inFlight.decrementAndGet();
                em.fail(new EngineUnavailableException("overloaded", "the server is overloaded: " + limit
                        + " requests are running or waiting (hyspec.scheduler.max-num-seqs + max-waiting); retry later", 1));
                return;
            }
            AtomicBoolean done = new AtomicBoolean();
            Runnable release = () -> {
                if (done.compareAndSet(false, true)) {
                    inFlight.decrementAndGet();
                }
            };
            TokenSink sink = new TokenSink() {
                @Override
                public void onTokens(int[] tokens, TokenLogprob[] logprobs) {
                    if (tokens.length > 0) {
                        em.emit(new TokenEvent(tokens, logprobs, null, null, null));
                    }
                }

                @Override
                public void onFinish(FinishReason reason, String message, RequestStats stats) {
                    release.run();
                    em.emit(new TokenEvent(new int[0], null, reason, message, stats));
                    em.complete();
                }
            };
            commands.add(() -> {
                try {
                    em.emit(TokenEvent.admitted(c.add(r, sink)));
                } catch (RuntimeException e) {
                    release.run();
                    em.fail(e);
                }
            });
            em.onTermination(() -> commands.add(() -> c.abort(r.id())));
        });
    }

    /** Aborts a request (no-op when it has finished); its stream ends with {@code abort}. */
    public void abort(String id) {
        EngineCore c = requireCore();
        commands.add(() -> c.abort(id));
    }

    /** The longest sequence (prompt + output) the engine serves; see {@link EngineCore#maxSequenceLength()}. */
    public int maxSequenceLength() {
        return requireCore().maxSequenceLength();
    }

    /** Requests submitted and not yet finished (running or waiting). */
    public int inFlight() {
        return inFlight.get();
    }

    /** Runs {@code query} on the engine thread and returns its answer (metrics, tests). */
    public <T> T query(Function<EngineCore, T> query) {
        EngineCore c = requireCore();
        CompletableFuture<T> f = new CompletableFuture<>();
        commands.add(() -> {
            try {
                f.complete(query.apply(c));
            } catch (RuntimeException e) {
                f.completeExceptionally(e);
            }
        });
        try {
            return f.get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new IllegalStateException("engine query failed: " + e, e);
        }
    }

    /** The engine's counters, taken on the engine thread; empty before a model is loaded. */
    public Optional<EngineMetrics> metrics() {
        return core == null ? Optional.empty() : Optional.of(query(EngineCore::metrics));
    }

    /**
     * The recurrent state pool of the running engine, as a bean (null before a model is loaded).
     * Only the engine thread may change it; other code reads it through {@link #query}.
     */
    @jakarta.enterprise.inject.Produces
    @jakarta.enterprise.context.Dependent
    MambaStatePool statePool() {
        EngineCore c = core;
        return c == null ? null : c.store().pool();
    }

    private EngineCore requireCore() {
        EngineCore c = core;
        if (c == null) {
            throw new IllegalStateException("no model is loaded");
        }
        return c;
    }

    private void loop() {
        while (!stopping) {
            try {
                Runnable cmd = core.hasWork() ? commands.poll() : commands.poll(100, TimeUnit.MILLISECONDS);
                while (cmd != null) {
                    cmd.run();
                    cmd = commands.poll();
                }
                if (core.hasWork()) {
                    core.step();
                }
                long now = System.nanoTime();
                // the pool and cache figures walk every slot and block: refresh them at a bounded rate, not every step
                if (now - snapshotNanos >= SNAPSHOT_INTERVAL_NANOS || snapshot == null) {
                    snapshot = core.metrics();
                    snapshotNanos = now;
                }
                heartbeat = now;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            } catch (RuntimeException | Error e) {
                LOG.error("engine step failed", e);
            }
        }
        core.close();
    }
}
