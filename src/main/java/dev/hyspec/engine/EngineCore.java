package dev.hyspec.engine;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.BatchRow;
import dev.hyspec.model.BatchRow.Logits;
import dev.hyspec.model.ForwardBatch;
import dev.hyspec.model.HybridModel;
import dev.hyspec.model.RowMode;
import dev.hyspec.sampling.Sampler;
import dev.hyspec.sampling.SpeculativeVerifier;
import dev.hyspec.sampling.TokenLogprob;
import dev.hyspec.sampling.Verification;
import dev.hyspec.spec.NgramDrafter;
import dev.hyspec.state.KvBlockPool;
import dev.hyspec.state.LayoutPolicy;
import dev.hyspec.state.MambaStatePool;
import dev.hyspec.state.RecurrentOps;
import dev.hyspec.state.RollbackStrategy;
import dev.hyspec.state.StateStore;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;

/**
 * The engine proper, without threads: a vLLM-style scheduler and the step that runs its decisions.
 * Not thread-safe; {@link Engine} owns one and calls it from its single engine thread, tests call it
 * directly.
 *
 * <p>Each {@link #step} spends a token budget ({@code maxNumBatchedTokens}, at most
 * {@code maxNumSeqs} requests) first on running requests, oldest first — a generate row
 * ({@code 1 + K} tokens: the last sampled token and the drafter's proposals) or the next prefill
 * chunk — then admits waiting requests. All rows run in one forward pass; then each generate row
 * is verified, its accepted tokens committed through the request's rollback strategy, and the new
 * tokens go to the request's sink. When KV pages run out, the newest running request is preempted:
 * its slot and pages are freed and it is recomputed from its tokens later, which gives the same
 * output.
 */
public final class EngineCore implements AutoCloseable {
    private final HybridModel model;
    private final Backend backend;
    private final EngineOptions options;
    private final StateStore store;
    private final RecurrentOps[] recurrentOps;
    private final Map<String, RollbackStrategy> strategies;
    private final TreeMap<String, Integer> abWeights;
    private final PrefixCache cache;
    private final Sampler sampler = new Sampler();
    private final SpeculativeVerifier verifier = new SpeculativeVerifier(sampler);
    private boolean forceAcceptance;
    private double forcedRate = 1;
    private Random forcedDraws = new Random(0);
    private final NgramDrafter ngram;
    private final Deque<RequestState> waiting = new ArrayDeque<>();
    private final List<RequestState> running = new ArrayList<>();
    private final Map<String, RequestState> requests = new HashMap<>();
    private final EngineMetrics metrics = new EngineMetrics();
    private final Set<Integer> eosTokenIds;
    private long arrivals;
    private List<StepRow> lastStep = List.of();
    private EngineObserver observer = EngineObserver.NONE;

    /**
     * @param strategies the rollback strategies by id (at least {@code options.defaultStrategy()})
     */
    public EngineCore(HybridModel model, EngineOptions options, Map<String, RollbackStrategy> strategies) {
        this.model = model;
        this.backend = model.backend();
        this.options = options;
        this.strategies = Map.copyOf(strategies);
        if (!strategies.containsKey(options.defaultStrategy())) {
            throw new IllegalArgumentException("unknown rollback strategy '" + options.defaultStrategy()
                    + "'; available: " + new TreeMap<>(strategies).keySet());
        }
        for (String s : options.abWeights().keySet()) {
            if (!strategies.containsKey(s)) {
                throw new IllegalArgumentException("unknown rollback strategy '" + s + "' in the A/B weights; available: "
                        + new TreeMap<>(strategies).keySet());
            }
        }
        this.abWeights = new TreeMap<>(options.abWeights());
        this.abWeights.values().removeIf(w -> w <= 0);
        LayoutPolicy layouts = options.layouts() != null ? options.layouts() : LayoutPolicy.of(model.naturalLayout());
        this.store = model.newStateStore(options.stateSlots(), options.pageSize(), options.kvPages(), layouts);
        this.recurrentOps = model.recurrentOps();
        this.cache = options.prefixCaching() ? new PrefixCache(options.prefixBlockSize(), store.pool(), store.kv()) : null;
        this.ngram = new NgramDrafter(options.ngramMin(), options.ngramMax(), Math.max(1, options.numDrafts()));
        this.eosTokenIds = Set.copyOf(model.config().eosTokenIds());
    }

    public HybridModel model() {
        return model;
    }

    public EngineOptions options() {
        return options;
    }

    /** The pools (read-only use: tests and metrics). */
    public StateStore store() {
        return store;
    }

    /**
     * For benchmarks of the speculative path's cost at full acceptance: every draft of a greedy row
     * is accepted whatever the target's argmax, and the token after the last draft is the argmax
     * there (the bonus). Requests then emit their drafts, not their greedy continuation; the state
     * stays that of the tokens emitted. Requires greedy rows whose argmax is taken on the device.
     * Never set by the server.
     */
    public void forceDraftAcceptance(boolean force) {
        forceDraftAcceptance(force ? 1.0 : -1.0, 0);
    }

    /**
     * As {@link #forceDraftAcceptance(boolean)}, at an acceptance rate: each draft of a row, in order,
     * is accepted with probability {@code rate} (a seeded stream of draws decides) until the first
     * rejected one, whose position then takes a token other than the draft, so the row stops there.
     * {@code rate} 1 accepts every draft; a negative rate turns forcing off.
     */
    public void forceDraftAcceptance(double rate, long seed) {
        if (rate > 1 || Double.isNaN(rate)) {
            throw new IllegalArgumentException("acceptance rate " + rate);
        }
        this.forceAcceptance = rate >= 0;
        this.forcedRate = rate;
        this.forcedDraws = new Random(seed);
    }

    /** Receives step and verification events from now on. */
    public void setObserver(EngineObserver observer) {
        this.observer = observer == null ? EngineObserver.NONE : observer;
    }

    public Set<String> strategyIds() {
        return new TreeMap<>(strategies).keySet();
    }

    /**
     * The longest sequence (prompt + output) a request may reach: {@code max-model-len}, and the KV
     * cache's capacity when the model has attention. Immutable, so any thread may ask.
     */
    public int maxSequenceLength() {
        int len = options.maxModelLen();
        return model.kvWidths().length > 0 ? Math.min(len, options.kvPages() * options.pageSize()) : len;
    }

    // ---- requests ----

    /** Checks a request against the model and the engine's limits; throws naming the field at fault. */
    public void validate(GenerationRequest r) {
        if (r.prompt().length == 0) {
            throw new InvalidRequestException("prompt", "the prompt is empty");
        }
        int vocab = model.config().vocabSize();
        for (int t : r.prompt()) {
            if (t < 0 || t >= vocab) {
                throw new InvalidRequestException("prompt", "token id " + t + " is outside the vocabulary [0, " + vocab + ")");
            }
        }
        if (r.prompt().length + r.sampling().maxTokens() > options.maxModelLen()) {
            throw new InvalidRequestException("max_tokens", "this model's maximum context length is "
                    + options.maxModelLen() + " tokens; the prompt has " + r.prompt().length
                    + " and max_tokens asks for " + r.sampling().maxTokens() + " more");
        }
        if (r.strategy() != null && !strategies.containsKey(r.strategy())) {
            throw new InvalidRequestException("rollback_strategy", "unknown rollback strategy '" + r.strategy()
                    + "'; available: " + strategyIds());
        }
        if (r.numDrafts() != null && (r.numDrafts() < 0 || r.numDrafts() + 1 > options.maxNumBatchedTokens())) {
            throw new InvalidRequestException("num_speculative_tokens", "num_speculative_tokens must be in [0, "
                    + (options.maxNumBatchedTokens() - 1) + "], got " + r.numDrafts());
        }
        int kvTokens = options.kvPages() * options.pageSize();
        if (model.kvWidths().length > 0 && r.prompt().length + r.sampling().maxTokens() > kvTokens) {
            throw new InvalidRequestException("max_tokens", "the prompt and max_tokens need "
                    + (r.prompt().length + r.sampling().maxTokens()) + " positions but the KV cache holds "
                    + kvTokens + " (hyspec.kv-cache.pages × page-size)");
        }
        if (requests.containsKey(r.id())) {
            throw new InvalidRequestException("id", "request id " + r.id() + " is already running");
        }
    }

    /**
     * Queues a request (validating it first); its tokens and its finish go to {@code sink}.
     *
     * @return the request's stats at admission (its strategy, no tokens yet)
     */
    public RequestStats add(GenerationRequest r, TokenSink sink) {
        validate(r);
        RollbackStrategy strategy = strategies.get(chooseStrategy(r));
        int drafts = r.numDrafts() != null ? r.numDrafts() : options.numDrafts();
        RequestState s = new RequestState(r, sink, arrivals++, strategy, r.drafter() != null ? r.drafter() : ngram,
                drafts);
        requests.put(r.id(), s);
        waiting.addLast(s);
        metrics.promptTokens += r.prompt().length;
        metrics.strategy(strategy.id()).requests++;
        return s.stats();
    }

    /** The strategy of a request: its pin, else the A/B split (sticky: a hash of the id), else the default. */
    String chooseStrategy(GenerationRequest r) {
        if (r.strategy() != null) {
            return r.strategy();
        }
        int total = abWeights.values().stream().mapToInt(Integer::intValue).sum();
        if (total <= 0) {
            return options.defaultStrategy();
        }
        long h = r.id().hashCode() * 0x9E3779B97F4A7C15L;
        int pick = (int) Math.floorMod(h ^ (h >>> 32), (long) total);
        for (Map.Entry<String, Integer> e : abWeights.entrySet()) {
            pick -= e.getValue();
            if (pick < 0) {
                return e.getKey();
            }
        }
        return options.defaultStrategy();
    }

    /** Aborts a request wherever it is; its resources are freed and its sink told {@code abort}. */
    public boolean abort(String id) {
        RequestState s = requests.get(id);
        if (s == null) {
            return false;
        }
        finish(s, FinishReason.ABORT, null);
        return true;
    }

    public boolean hasWork() {
        return !waiting.isEmpty() || !running.isEmpty();
    }

    public int numRunning() {
        return running.size();
    }

    public int numWaiting() {
        return waiting.size();
    }

    /** The rollback strategy a known request runs with, or null. */
    public String strategyOf(String id) {
        RequestState s = requests.get(id);
        return s == null ? null : s.strategy.id();
    }

    /** The slot a running request holds, or -1. */
    public int slotOf(String id) {
        RequestState s = requests.get(id);
        return s == null ? -1 : s.slot;
    }

    /** A running request's committed token count, or -1. */
    public int computedTokensOf(String id) {
        RequestState s = requests.get(id);
        return s == null ? -1 : s.numComputedTokens;
    }

    /** A copy of the request's tokens (prompt then output), or null. */
    public int[] tokensOf(String id) {
        RequestState s = requests.get(id);
        return s == null ? null : Arrays.copyOf(s.tokens, s.length);
    }

    /**
     * Makes a running request's slot hold exactly {@code S(L)} (replay applies its pending tokens) so
     * that tests and copies can read the committed state.
     */
    public void settle(String id) {
        RequestState s = requests.get(id);
        if (s != null && s.slot >= 0) {
            s.strategy.settle(store.pool(), s.slot, recurrentOps);
        }
    }

    /**
     * Copies a running request's committed state {@code S(L)}, {@code U(L)} into a newly allocated
     * slot, which the caller releases; -1 when the request holds no slot or the pool is full.
     */
    public int copyCommitted(String id) {
        RequestState s = requests.get(id);
        if (s == null || s.slot < 0) {
            return -1;
        }
        int target = store.pool().alloc();
        if (target >= 0) {
            s.strategy.copyCommitted(store.pool(), s.slot, recurrentOps, target);
        }
        return target;
    }

    /** One row of the last step, for tests and logs. */
    public record StepRow(String requestId, RowMode mode, int tokens, int drafts) {}

    /** The rows the last step ran. */
    public List<StepRow> lastStep() {
        return lastStep;
    }

    /** A prefix-cache checkpoint: the state after {@code tokens} (a whole number of blocks) sits in {@code slot}. */
    public record CachedCheckpoint(int[] tokens, int slot) {}

    /** Every prefix-cache block that holds a state checkpoint. */
    public List<CachedCheckpoint> prefixCheckpoints() {
        return cache == null ? List.of() : cache.checkpoints();
    }

    // ---- the step ----

    /** One scheduled row: which request, which tokens. */
    private record Scheduled(RequestState request, BatchRow row) {}

    /** Schedules, runs one forward pass, verifies and commits. Returns false when there was nothing to run. */
    public boolean step() {
        List<Scheduled> scheduled = schedule();
        if (scheduled.isEmpty()) {
            return false;
        }
        metrics.steps++;
        long stepStart = System.nanoTime();
        List<BatchRow> rows = new ArrayList<>(scheduled.size());
        List<StepRow> described = new ArrayList<>(scheduled.size());
        for (Scheduled s : scheduled) {
            rows.add(s.row());
            described.add(new StepRow(s.request().id(), s.row().mode(), s.row().length(), s.request().drafts.length));
        }
        lastStep = List.copyOf(described);
        // Greedy rows without logprobs need only the argmax of their logit rows: taken on the device,
        // so a step downloads R·T ints instead of R·T·V floats.
        boolean argmaxOnly = true;
        for (Scheduled s : scheduled) {
            argmaxOnly &= s.request().request.sampling().isGreedy() && s.request().request.logprobs() < 0;
        }
        float[] logits = null;
        int[] picks = null;
        long t0 = System.nanoTime();
        try {
            Tensor out = model.forward(new ForwardBatch(rows), store);
            try {
                if (argmaxOnly) {
                    picks = out.rows() == 0 ? new int[0] : backend.argmax(out);
                } else {
                    logits = backend.download(out);
                }
            } finally {
                backend.free(out);
            }
        } catch (RuntimeException e) {
            for (Scheduled s : scheduled) {
                metrics.errors++;
                finish(s.request(), FinishReason.ERROR, "engine failure: " + e);
            }
            return true;
        }
        long forwardNanos = System.nanoTime() - t0;
        int batchTokens = totalTokens(rows);
        int vocab = model.config().vocabSize();
        int at = 0;
        List<Verified> verified = new ArrayList<>();
        for (Scheduled s : scheduled) {
            RequestState r = s.request();
            BatchRow row = s.row();
            int n = row.logitRows();
            float[][] rowLogits = null;
            int[] rowPicks = null;
            if (picks != null) {
                rowPicks = Arrays.copyOfRange(picks, at, at + n);
            } else {
                rowLogits = new float[n][];
                for (int i = 0; i < n; i++) {
                    rowLogits[i] = Arrays.copyOfRange(logits, (at + i) * vocab, (at + i + 1) * vocab);
                }
            }
            at += n;
            try {
                if (row.mode() == RowMode.PREFILL) {
                    afterPrefill(r, row, rowLogits, rowPicks);
                } else {
                    verified.add(verify(r, row, rowLogits, rowPicks, forwardNanos * row.length() / batchTokens));
                }
            } catch (RuntimeException e) {
                metrics.errors++;
                finish(r, FinishReason.ERROR, "engine failure: " + e);
            }
        }
        commitAndEmit(verified);
        int generateRows = 0;
        for (BatchRow row : rows) {
            generateRows += row.mode() == RowMode.GENERATE ? 1 : 0;
        }
        observer.onStep(System.nanoTime() - stepStart, generateRows, rows.size() - generateRows, batchTokens);
        return true;
    }

    private static int totalTokens(List<BatchRow> rows) {
        int n = 0;
        for (BatchRow r : rows) {
            n += r.length();
        }
        return n;
    }

    private void afterPrefill(RequestState r, BatchRow row, float[][] logits, int[] picks) {
        int before = r.numComputedTokens;
        r.numComputedTokens += row.length();
        metrics.prefillTokens += row.length();
        if (cache != null) {
            // blocks completed by this chunk; the chunk ends on a boundary, so its last block gets the state
            cacheBlocks(r, r.tokens, before, r.numComputedTokens, false,
                    (end, target) -> store.pool().copy(r.slot, target));
        }
        if (r.numComputedTokens == r.length) {
            int token = picks != null ? picks[0] : sampler.sample(logits[0], r.request.sampling(), r.rng);
            emit(r, new int[] {token}, logits);
        }
    }

    /** A generate row's outcome, verified and checkpointed, waiting for its commit. */
    private record Verified(RequestState request, BatchRow row, Verification verification, float[][] logits,
                            long nanos) {}

    /** Verifies a generate row and saves the prefix-cache checkpoints it crosses (before the commit). */
    private Verified verify(RequestState r, BatchRow row, float[][] logits, int[] picks, long nanos) {
        long t0 = System.nanoTime();
        int[] drafts = r.drafts;
        if (forceAcceptance) {
            if (picks == null) {
                throw new IllegalStateException("forced draft acceptance needs greedy rows without logprobs");
            }
            picks = picks.clone();
            // the target "agrees" with the first m drafts and not with the next one
            int m = 0;
            while (m < drafts.length && (forcedRate >= 1 || forcedDraws.nextDouble() < forcedRate)) {
                m++;
            }
            System.arraycopy(drafts, 0, picks, 0, m);
            if (m < drafts.length && picks[m] == drafts[m]) {
                picks[m] = (drafts[m] + 1) % model.config().vocabSize();
            }
        }
        Verification v = picks != null ? SpeculativeVerifier.greedy(picks, drafts)
                : verifier.verify(logits, drafts, r.request.sampling(), r.rng);
        int accepted = v.numOutputTokens();   // a: accepted drafts + the bonus/recovered token
        int before = r.numComputedTokens;
        if (cache != null && (before / cache.blockSize() + 1) * cache.blockSize() <= before + accepted) {
            // the committed tokens: the accepted drafts are not in r.tokens until emit appends them
            int[] committed = Arrays.copyOf(r.tokens, before + accepted);
            System.arraycopy(row.tokens(), 0, committed, before, accepted);
            cacheBlocks(r, committed, before, before + accepted, true,
                    (end, target) -> r.strategy.snapshot(store.pool(), r.slot, recurrentOps, end - before, target));
        }
        return new Verified(r, row, v, logits, nanos + System.nanoTime() - t0);
    }

    /**
     * Commits the step's generate rows, every row of a strategy in one call (one launch per
     * operation for all of them), then records and emits each row's tokens.
     */
    private void commitAndEmit(List<Verified> verified) {
        Map<RollbackStrategy, List<Verified>> byStrategy = new LinkedHashMap<>();
        for (Verified v : verified) {
            byStrategy.computeIfAbsent(v.request().strategy, k -> new ArrayList<>()).add(v);
        }
        for (Map.Entry<RollbackStrategy, List<Verified>> group : byStrategy.entrySet()) {
            List<Verified> rows = group.getValue();
            int[] slots = new int[rows.size()];
            int[] accepted = new int[rows.size()];
            for (int i = 0; i < rows.size(); i++) {
                slots[i] = rows.get(i).request().slot;
                accepted[i] = rows.get(i).verification().numOutputTokens();
            }
            long commitStart = System.nanoTime();
            try {
                group.getKey().commitBatch(store.pool(), slots, recurrentOps, accepted);
            } catch (RuntimeException e) {
                for (Verified v : rows) {
                    metrics.errors++;
                    finish(v.request(), FinishReason.ERROR, "engine failure: " + e);
                }
                continue;
            }
            long commitNanos = (System.nanoTime() - commitStart) / rows.size();
            for (Verified v : rows) {
                try {
                    afterCommit(v, commitNanos);
                } catch (RuntimeException e) {
                    metrics.errors++;
                    finish(v.request(), FinishReason.ERROR, "engine failure: " + e);
                }
            }
        }
    }

    private void afterCommit(Verified verified, long commitNanos) {
        RequestState r = verified.request();
        Verification v = verified.verification();
        int[] drafts = r.drafts;
        r.numComputedTokens += v.numOutputTokens();
        r.draftTokens += drafts.length;
        r.acceptedDraftTokens += v.numAcceptedTokens();
        if (drafts.length > 0) {
            r.drafter.onAccepted(drafts.length, v.numAcceptedTokens());
        }
        EngineMetrics.StrategyStats st = metrics.strategy(r.strategy.id());
        st.generateRows++;
        st.draftTokens += drafts.length;
        st.acceptedDraftTokens += v.numAcceptedTokens();
        st.generateNanos += verified.nanos() + commitNanos;
        observer.onVerified(r.strategy.id(), drafts.length, v.numAcceptedTokens(), commitNanos);
        emit(r, v.outputTokens(), verified.logits());
    }

    /** Saves the state at a block boundary into a fresh slot: {@code (end, target)}. */
    private interface Checkpointer {
        void save(int end, int target);
    }

    /**
     * Records the blocks whose last position lies in {@code (from, to]}. A block gets a state
     * checkpoint when the engine has the exact state at its end: every boundary of a generate row
     * (the strategy snapshots inside the row), only the row's end for a prefill chunk.
     * {@code tokens} holds the sequence's tokens up to at least {@code to}.
     */
    private void cacheBlocks(RequestState r, int[] tokens, int from, int to, boolean everyBoundary,
                             Checkpointer checkpointer) {
        int b = cache.blockSize();
        int pagesPerBlock = b / options.pageSize();
        for (int end = (from / b + 1) * b; end <= to; end += b) {
            PrefixCache.Block parent = r.cachedTail;
            if (end > b && (parent == null || parent.end(b) != end - b)) {
                return;   // the chain above this block is not cached (evicted, or never complete)
            }
            int[] pages = store.kv().enabled()
                    ? Arrays.copyOfRange(r.pages, (end - b) / options.pageSize(), end / options.pageSize())
                    : new int[0];
            if (store.kv().enabled() && pages.length != pagesPerBlock) {
                return;
            }
            PrefixCache.Block block = cache.insert(parent, tokens, end - b, pages);
            if (block == null) {
                return;
            }
            r.cachedTail = block;
            if (block.stateSlot < 0 && store.pool().numLayers() > 0 && (everyBoundary || end == to)) {
                int target = allocSlot(true);
                if (target >= 0) {
                    checkpointer.save(end, target);
                    block.stateSlot = target;
                }
            }
        }
    }

    /**
     * Appends generated tokens, stopping at a stop token, max_tokens or the context limit.
     * {@code logits[i]} is the row token {@code i} was sampled from (for logprobs).
     */
    private void emit(RequestState r, int[] generated, float[][] logits) {
        int n = 0;
        FinishReason reason = null;
        for (int token : generated) {
            r.append(token);
            n++;
            if (isStop(r, token)) {
                reason = FinishReason.STOP;
                break;
            }
            if (r.numOutput >= r.request.sampling().maxTokens() || r.length >= options.maxModelLen()) {
                reason = FinishReason.LENGTH;
                break;
            }
        }
        metrics.strategy(r.strategy.id()).outputTokens += n;
        TokenLogprob[] logprobs = null;
        if (r.request.logprobs() >= 0) {
            logprobs = new TokenLogprob[n];
            for (int i = 0; i < n; i++) {
                logprobs[i] = TokenLogprob.of(logits[i], generated[i], r.request.logprobs());
            }
        }
        r.sink.onTokens(Arrays.copyOf(generated, n), logprobs);
        if (reason != null) {
            finish(r, reason, null);
        }
    }

    private boolean isStop(RequestState r, int token) {
        return (eosTokenIds.contains(token) && !r.request.sampling().ignoreEos())
                || r.request.sampling().stopTokenIds().contains(token);
    }

    private void finish(RequestState r, FinishReason reason, String message) {
        if (requests.remove(r.id()) == null) {
            return;
        }
        waiting.remove(r);
        running.remove(r);
        freeResources(r);
        if (reason == FinishReason.ABORT) {
            metrics.aborted++;
        } else {
            metrics.finished++;
        }
        r.sink.onFinish(reason, message, r.stats());
    }

    private void freeResources(RequestState r) {
        if (r.slot >= 0) {
            store.pool().release(r.slot);
        }
        for (int p : r.pages) {
            store.kv().release(p);
        }
        r.slot = -1;
        r.pages = new int[0];
    }

    // ---- scheduling ----

    private List<Scheduled> schedule() {
        List<Scheduled> out = new ArrayList<>();
        int budget = options.maxNumBatchedTokens();
        // running requests first, oldest first
        for (RequestState r : List.copyOf(running)) {
            if (budget <= 0) {
                break;
            }
            if (!running.contains(r)) {
                continue;   // preempted for an older request in this loop
            }
            BatchRow row = plan(r, budget);
            if (row == null) {
                continue;
            }
            int need = r.numComputedTokens + row.length();
            boolean preemptedSelf = false;
            while (!ensurePages(r, need)) {
                RequestState victim = newestRunning();
                preempt(victim);
                if (victim == r) {
                    preemptedSelf = true;
                    break;
                }
                for (Scheduled s : List.copyOf(out)) {
                    if (s.request() == victim) {
                        out.remove(s);
                        budget += s.row().length();
                    }
                }
            }
            if (preemptedSelf) {
                continue;
            }
            row = withPages(row, r);
            out.add(new Scheduled(r, row));
            budget -= row.length();
        }
        // then waiting requests, in arrival order (preempted ones come back first)
        while (!waiting.isEmpty() && running.size() < options.maxNumSeqs() && budget > 0) {
            RequestState r = waiting.peekFirst();
            if (!admit(r)) {
                break;
            }
            BatchRow row = plan(r, budget);
            if (row == null || !ensurePages(r, r.numComputedTokens + row.length())) {
                freeResources(r);
                r.restart();
                break;
            }
            waiting.pollFirst();
            running.add(r);
            out.add(new Scheduled(r, withPages(row, r)));
            budget -= row.length();
        }
        return out;
    }

    /** The row a request runs this step within {@code budget} tokens (page table filled in later), or null. */
    private BatchRow plan(RequestState r, int budget) {
        if (r.prefilling()) {
            int remaining = r.prefillEnd - r.numComputedTokens;
            int n = Math.min(remaining, budget);
            if (cache != null) {
                // align mode: a chunk ends on a block boundary, so the state there can be saved; only
                // the tail after the last boundary (shorter than a block) ends elsewhere
                int b = cache.blockSize();
                int aligned = (r.numComputedTokens + n) / b * b - r.numComputedTokens;
                if (aligned > 0) {
                    n = aligned;
                }
            }
            int[] tokens = Arrays.copyOfRange(r.tokens, r.numComputedTokens, r.numComputedTokens + n);
            r.drafts = new int[0];
            return new BatchRow(r.slot, tokens, r.numComputedTokens, RowMode.PREFILL, null, r.pages,
                    r.numComputedTokens + n == r.length ? Logits.LAST : Logits.NONE);
        }
        int k = Math.min(r.numDrafts, budget - 1);
        k = Math.min(k, r.request.sampling().maxTokens() - r.numOutput - 1);
        k = Math.min(k, options.maxModelLen() - r.length - 1);
        int[] drafts = new int[0];
        if (k > 0) {
            try {
                drafts = r.drafter.propose(r.tokens, r.length, k);
            } catch (RuntimeException e) {
                // drafts only affect speed: a failing drafter means a plain decode step
                drafts = new int[0];
            }
        }
        int vocab = model.config().vocabSize();
        if (Arrays.stream(drafts).anyMatch(t -> t < 0 || t >= vocab)) {
            drafts = new int[0];
        }
        if (drafts.length > k) {
            drafts = Arrays.copyOf(drafts, k);
        }
        r.drafts = drafts;
        // the row: every token not yet computed, drafts included (numComputedTokens = length − 1 here)
        int[] tokens = new int[r.numTokensWithSpec() - r.numComputedTokens];
        tokens[0] = r.tokens[r.length - 1];
        System.arraycopy(drafts, 0, tokens, 1, drafts.length);
        return new BatchRow(r.slot, tokens, r.numComputedTokens, RowMode.GENERATE, r.strategy, r.pages, Logits.ALL);
    }

    private static BatchRow withPages(BatchRow row, RequestState r) {
        return new BatchRow(r.slot, row.tokens(), row.start(), row.mode(), row.strategy(), r.pages, row.logits());
    }

    /** Gives a waiting request a slot: from the prefix cache when it has a hit, else a fresh one. */
    private boolean admit(RequestState r) {
        if (r.slot >= 0) {
            return true;
        }
        if (cache != null) {
            PrefixCache.Hit hit = cache.lookup(r.tokens, r.prefillEnd - 1);
            if (hit != null) {
                int slot = store.pool().numLayers() > 0 ? forkSlot(hit.block().stateSlot) : allocSlot(true);
                if (slot >= 0) {
                    List<Integer> pages = new ArrayList<>();
                    for (PrefixCache.Block b : hit.chain()) {
                        for (int p : b.pages) {
                            store.kv().retain(p);
                            pages.add(p);
                        }
                    }
                    r.slot = slot;
                    r.pages = pages.stream().mapToInt(Integer::intValue).toArray();
                    r.numComputedTokens = hit.block().end(cache.blockSize());
                    r.cachedTail = hit.block();
                    if (r.numOutput == 0) {
                        r.cachedPromptTokens = r.numComputedTokens;
                    }
                    cache.recordHit(hit);
                    return true;
                }
            }
        }
        r.slot = allocSlot(true);
        return r.slot >= 0;
    }

    /** A zeroed slot, evicting prefix-cache checkpoints if needed (only for admissions). */
    private int allocSlot(boolean evict) {
        int slot = store.pool().alloc();
        while (slot < 0 && evict && cache != null && cache.evictStateSlot()) {
            slot = store.pool().alloc();
        }
        return slot;
    }

    /**
     * A slot holding a copy of checkpoint {@code src}. When the pool is full the cache gives up its
     * least recently used checkpoints; if that was {@code src} itself, the request takes its slot over.
     */
    private int forkSlot(int src) {
        MambaStatePool pool = store.pool();
        pool.retain(src);
        int slot = allocSlot(true);
        if (slot >= 0) {
            pool.copy(src, slot);
            pool.release(src);
            return slot;
        }
        if (pool.refCount(src) == 1) {
            return src;
        }
        pool.release(src);
        return -1;
    }

    /** Gives the request pages for positions {@code [0, positions)}, evicting cached blocks if needed. */
    private boolean ensurePages(RequestState r, int positions) {
        KvBlockPool kv = store.kv();
        int need = kv.pagesFor(positions);
        while (r.pages.length < need) {
            int p = kv.allocate();
            while (p < 0 && cache != null && cache.evictPages()) {
                p = kv.allocate();
            }
            if (p < 0) {
                return false;
            }
            r.pages = Arrays.copyOf(r.pages, r.pages.length + 1);
            r.pages[r.pages.length - 1] = p;
        }
        return true;
    }

    private RequestState newestRunning() {
        RequestState newest = running.get(0);
        for (RequestState r : running) {
            if (r.arrival > newest.arrival) {
                newest = r;
            }
        }
        return newest;
    }

    /** Frees everything a running request holds and queues it to be recomputed from its tokens. */
    private void preempt(RequestState r) {
        running.remove(r);
        freeResources(r);
        r.restart();
        waiting.addFirst(r);
        metrics.preemptions++;
    }

    private void updatePoolMetrics() {
        metrics.running = running.size();
        metrics.waiting = waiting.size();
        MambaStatePool pool = store.pool();
        metrics.slotsUsed = pool.usedSlots();
        metrics.slotsTotal = pool.capacity();
        metrics.stateBytes = pool.bytes();
        metrics.kvPagesUsed = store.kv().usedPages();
        metrics.kvPagesTotal = store.kv().numPages();
        metrics.layoutConversions = pool.conversions();
        if (cache != null) {
            metrics.prefixQueries = cache.queries();
            metrics.prefixQueriedTokens = cache.queriedTokens();
            metrics.prefixHits = cache.hits();
            metrics.prefixHitTokens = cache.hitTokens();
            metrics.prefixEvictions = cache.evictions();
            metrics.prefixBlocks = cache.size();
            metrics.prefixCheckpoints = cache.stateCheckpoints();
        }
    }

    /** A snapshot of the engine's counters. */
    public EngineMetrics metrics() {
        updatePoolMetrics();
        return metrics.copy();
    }

    /** Aborts everything and frees the pools. */
    @Override
    public void close() {
        for (RequestState r : List.copyOf(requests.values())) {
            finish(r, FinishReason.ABORT, null);
        }
        if (cache != null) {
            cache.clear();
        }
        store.close();
    }
}
