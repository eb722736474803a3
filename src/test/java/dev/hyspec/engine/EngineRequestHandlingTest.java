package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.model.HybridModel;
import dev.hyspec.sampling.SamplingParams;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * How the engine treats a request from admission to finish: seeded sampling is reproducible across
 * engines and differs between seeds; stop token ids and EOS end a request with {@code stop} and the
 * stop token as the last token emitted (also when it is accepted in the middle of a run of drafts),
 * unless EOS is ignored; {@code max_tokens} ends it with {@code length} after exactly that many
 * tokens; bad input is refused by {@link EngineCore#validate} and {@link EngineCore#add} with an
 * {@link InvalidRequestException} naming the field, without disturbing a request already running
 * and without leaking slots or pages.
 */
class EngineRequestHandlingTest {
    private static final int K = 4;
    private static final List<String> MODELS = List.of("nemotron_h", "qwen3_5");

    private static EngineOptions options(String strategy) {
        return EngineOptions.defaults().withDrafts(K).withStrategy(strategy, Map.of()).withPrefixCache(true, 16);
    }

    private static EngineHarness.Collector runOne(EngineCore core, GenerationRequest r) {
        return EngineHarness.run(core, List.of(r)).get(r.id());
    }

    private static Stream<DynamicTest> perModelAndStrategy(String label, java.util.function.BiConsumer<HybridModel, String> test) {
        List<DynamicTest> tests = new ArrayList<>();
        for (String name : MODELS) {
            for (String strategy : EngineHarness.STRATEGIES) {
                tests.add(DynamicTest.dynamicTest(label + " / " + name + " / " + strategy,
                        () -> test.accept(EngineHarness.model(EngineHarness.fixture(name)), strategy)));
            }
        }
        return tests.stream();
    }

    // ---- sampling seeds ----

    private static SamplingParams sampled(long seed, int n) {
        return new SamplingParams(0.9, 1.0, 0, seed, n, List.of(), true);
    }

    @TestFactory
    Stream<DynamicTest> sameSeedSameSampledOutputAcrossEnginesDifferentSeedsDiffer() {
        return perModelAndStrategy("seeds", (model, strategy) -> {
            int vocab = model.config().vocabSize();
            int[] prompt = EngineHarness.repetitivePrompt(20, 5, 4, vocab);
            int n = 40;
            List<int[]> byEngine = new ArrayList<>();
            for (int engine = 0; engine < 2; engine++) {
                EngineCore core = EngineHarness.engine(model, options(strategy));
                EngineHarness.Collector c = runOne(core, GenerationRequest.of("s", prompt, sampled(1234, n)));
                assertEquals(FinishReason.LENGTH, c.reason);
                assertEquals(n, c.output().length);
                byEngine.add(c.output());
                core.close();
            }
            assertArrayEquals(byEngine.get(0), byEngine.get(1), "same seed, two engines: same output");
            // the sampled output is not the greedy one (the seed is really used)
            assertTrue(!Arrays.equals(EngineHarness.referenceGreedy(model, prompt, n), byEngine.get(0)),
                    "temperature 0.9 should leave the greedy path");
            // other seeds, all in one engine: they differ from seed 1234 and from each other
            EngineCore core = EngineHarness.engine(model, options(strategy));
            List<GenerationRequest> others = new ArrayList<>();
            for (long seed = 1; seed <= 5; seed++) {
                others.add(GenerationRequest.of("seed-" + seed, prompt, sampled(seed, n)));
            }
            Map<String, EngineHarness.Collector> out = EngineHarness.run(core, others);
            Set<List<Integer>> distinct = new HashSet<>();
            int differFromFirst = 0;
            for (EngineHarness.Collector c : out.values()) {
                assertEquals(n, c.output().length);
                distinct.add(c.tokens);
                differFromFirst += Arrays.equals(c.output(), byEngine.get(0)) ? 0 : 1;
            }
            assertEquals(5, differFromFirst, "five other seeds, none reproducing seed 1234's output");
            assertTrue(distinct.size() >= 4, "other seeds give different outputs: " + distinct.size() + " distinct of 5");
            core.close();
        });
    }

    // ---- stop tokens, EOS, max tokens ----

    @TestFactory
    Stream<DynamicTest> aStopTokenEndsWithStopAndIsTheLastTokenEmitted() {
        return perModelAndStrategy("stop ids", (model, strategy) -> {
            int vocab = model.config().vocabSize();
            int[] prompt = EngineHarness.repetitivePrompt(18, 4, 6, vocab);
            int n = 40;
            int[] ref = EngineHarness.referenceGreedy(model, prompt, n);
            Set<Integer> eos = Set.copyOf(model.config().eosTokenIds());
            // stop at the first output token (sampled straight after the prefill) and at tokens later on
            List<Integer> stops = new ArrayList<>();
            stops.add(0);
            for (int at = 7; at < n && stops.size() < 4; at++) {
                // a token's first occurrence, a few tokens after the previous stop position
                if (at >= stops.get(stops.size() - 1) + 5 && !contains(ref, ref[at], at) && !eos.contains(ref[at])) {
                    stops.add(at);
                }
            }
            assertTrue(stops.size() >= 3, "the reference offers stop positions: " + stops);
            for (int j : stops) {
                int stop = ref[j];
                for (boolean drafts : new boolean[] {false, true}) {
                    EngineCore core = EngineHarness.engine(model, options(strategy));
                    SamplingParams p = new SamplingParams(0.0, 1.0, 0, null, n, List.of(stop, vocab + 7), true);
                    GenerationRequest r = GenerationRequest.of("stop", prompt, p);
                    // the noisy oracle drafts past the stop token: the tokens after it must not come out
                    r = drafts ? r.withDrafter(EngineHarness.noisyOracle(ref, prompt.length, vocab, 40 + j), K)
                            : r.withDrafter(null, 0);
                    EngineHarness.Collector c = runOne(core, r);
                    String what = "stop token " + stop + " at " + j + (drafts ? " with drafts" : "");
                    assertEquals(FinishReason.STOP, c.reason, what);
                    assertArrayEquals(Arrays.copyOf(ref, j + 1), c.output(), what);
                    assertEquals(stop, c.tokens.get(c.tokens.size() - 1), what + ": last emitted");
                    assertNoLeaks(core, what);
                    core.close();
                }
            }
        });
    }

    private static boolean contains(int[] a, int v, int before) {
        for (int i = 0; i < before; i++) {
            if (a[i] == v) {
                return true;
            }
        }
        return false;
    }

    @TestFactory
    Stream<DynamicTest> eosStopsUnlessIgnored() {
        List<DynamicTest> tests = new ArrayList<>();
        for (String strategy : EngineHarness.STRATEGIES) {
            tests.add(DynamicTest.dynamicTest("qwen3_5 / " + strategy, () -> {
                // qwen3_5's prompt 1: transformers' own greedy rollout reaches EOS at output index 21
                var f = EngineHarness.fixture("qwen3_5");
                HybridModel model = EngineHarness.model(f);
                int vocab = model.config().vocabSize();
                int[] prompt = f.prompts().get(1);
                int n = 40;
                int[] ref = EngineHarness.referenceGreedy(model, prompt, n);
                List<Integer> eos = model.config().eosTokenIds();
                int at = -1;
                for (int i = 0; i < n && at < 0; i++) {
                    at = eos.contains(ref[i]) ? i : -1;
                }
                assertTrue(at > 0, "the reference continuation reaches EOS " + eos);
                assertEquals(f.greedy().get(1)[at], ref[at], "EOS where transformers put it");
                for (boolean drafts : new boolean[] {false, true}) {
                    String what = strategy + (drafts ? " with drafts" : "");
                    EngineCore core = EngineHarness.engine(model, options(strategy));
                    GenerationRequest stops = GenerationRequest.of("eos", prompt, SamplingParams.greedy(n));
                    GenerationRequest ignores = GenerationRequest.of("ignore", prompt, greedy(n));
                    if (drafts) {
                        stops = stops.withDrafter(EngineHarness.noisyOracle(ref, prompt.length, vocab, 5), K);
                        ignores = ignores.withDrafter(EngineHarness.noisyOracle(ref, prompt.length, vocab, 6), K);
                    }
                    Map<String, EngineHarness.Collector> out = EngineHarness.run(core, List.of(stops, ignores));
                    assertEquals(FinishReason.STOP, out.get("eos").reason, what);
                    assertArrayEquals(Arrays.copyOf(ref, at + 1), out.get("eos").output(), what + ": up to EOS");
                    assertEquals(FinishReason.LENGTH, out.get("ignore").reason, what + ": ignore_eos");
                    assertArrayEquals(ref, out.get("ignore").output(), what + ": ignore_eos runs on past EOS");
                    assertNoLeaks(core, what);
                    core.close();
                }
            }));
        }
        return tests.stream();
    }

    @TestFactory
    Stream<DynamicTest> maxTokensEndsWithLengthAfterExactlyThatMany() {
        return perModelAndStrategy("max tokens", (model, strategy) -> {
            int vocab = model.config().vocabSize();
            int[] prompt = EngineHarness.repetitivePrompt(20, 5, 8, vocab);
            int[] ref = EngineHarness.referenceGreedy(model, prompt, 44);
            EngineOptions options = options(strategy);
            options = new EngineOptions(options.maxNumSeqs(), options.maxNumBatchedTokens(), 64, options.stateSlots(),
                    options.pageSize(), options.kvPages(), options.numDrafts(), options.ngramMin(), options.ngramMax(),
                    options.defaultStrategy(), options.abWeights(), options.prefixCaching(), options.prefixBlockSize(),
                    options.layouts());
            EngineCore core = EngineHarness.engine(model, options);
            List<GenerationRequest> requests = new ArrayList<>();
            int[] limits = {1, 2, 3, 5, 7, 44};   // 44: prompt + max_tokens = max_model_len exactly
            for (int m : limits) {
                requests.add(GenerationRequest.of("oracle-" + m, prompt, greedy(m))
                        .withDrafter(EngineHarness.noisyOracle(ref, prompt.length, vocab, m), K));
                requests.add(GenerationRequest.of("ngram-" + m, prompt, greedy(m)));
                // drafts that are all right: every step would accept K + 1 tokens if the limit let it
                requests.add(GenerationRequest.of("exact-" + m, prompt, greedy(m)).withDrafter(
                        (tokens, length, k) -> Arrays.copyOfRange(ref, length - prompt.length,
                                Math.min(ref.length, length - prompt.length + k)), K));
            }
            Map<String, EngineHarness.Collector> out = EngineHarness.run(core, requests);
            for (var e : out.entrySet()) {
                int m = Integer.parseInt(e.getKey().substring(e.getKey().indexOf('-') + 1));
                assertEquals(FinishReason.LENGTH, e.getValue().reason, e.getKey());
                assertArrayEquals(Arrays.copyOf(ref, m), e.getValue().output(), e.getKey() + ": exactly max_tokens");
            }
            assertNoLeaks(core, "max tokens");
            core.close();
        });
    }

    // ---- bad input ----

    private static void assertRefused(EngineCore core, GenerationRequest r, String param) {
        int waiting = core.numWaiting();
        int running = core.numRunning();
        long prompts = core.metrics().promptTokens;
        String before = core.strategyOf(r.id());
        InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> core.validate(r), param);
        assertEquals(param, e.param(), e.getMessage());
        e = assertThrows(InvalidRequestException.class, () -> core.add(r, new EngineHarness.Collector()), param);
        assertEquals(param, e.param(), e.getMessage());
        assertEquals(waiting, core.numWaiting(), param + ": nothing queued");
        assertEquals(running, core.numRunning(), param + ": nothing started");
        assertEquals(prompts, core.metrics().promptTokens, param + ": nothing counted");
        assertEquals(before, core.strategyOf(r.id()), param + ": the id's state is untouched");
    }

    @Test
    void badInputIsRefusedNamingTheField() {
        HybridModel model = EngineHarness.model(EngineHarness.fixture("nemotron_h"));
        int vocab = model.config().vocabSize();
        EngineOptions o = EngineOptions.defaults();
        o = new EngineOptions(o.maxNumSeqs(), o.maxNumBatchedTokens(), 64, o.stateSlots(), o.pageSize(), o.kvPages(),
                o.numDrafts(), o.ngramMin(), o.ngramMax(), o.defaultStrategy(), o.abWeights(), o.prefixCaching(),
                o.prefixBlockSize(), o.layouts());
        EngineCore core = EngineHarness.engine(model, o);
        int[] prompt = new int[20];
        Arrays.fill(prompt, 9);
        assertRefused(core, GenerationRequest.of("empty", new int[0], greedy(4)), "prompt");
        assertRefused(core, GenerationRequest.of("vocab", new int[] {5, vocab, 6}, greedy(4)), "prompt");
        assertRefused(core, GenerationRequest.of("negative", new int[] {5, -1}, greedy(4)), "prompt");
        assertRefused(core, GenerationRequest.of("long", prompt, greedy(45)), "max_tokens");
        assertRefused(core, GenerationRequest.of("drafts", prompt, greedy(4)).withDrafter(null, -1),
                "num_speculative_tokens");
        core.validate(GenerationRequest.of("fits", prompt, greedy(44)));   // exactly max_model_len: fine
        core.validate(GenerationRequest.of("last-token", new int[] {0, vocab - 1}, greedy(1)));
        core.add(GenerationRequest.of("dup", prompt, greedy(4)), new EngineHarness.Collector());
        assertRefused(core, GenerationRequest.of("dup", new int[] {3}, greedy(2)), "id");
        EngineHarness.drain(core);
        // once finished, the id is free again
        core.validate(GenerationRequest.of("dup", new int[] {3}, greedy(2)));
        core.close();
    }

    @TestFactory
    Stream<DynamicTest> aRefusedRequestDisturbsNothingAndNothingLeaks() {
        List<DynamicTest> tests = new ArrayList<>();
        for (String name : MODELS) {
            for (String strategy : EngineHarness.STRATEGIES) {
                for (boolean cache : new boolean[] {true, false}) {
                    tests.add(DynamicTest.dynamicTest(name + " / " + strategy + (cache ? " / prefix cache" : ""),
                            () -> refusedAmidRunning(EngineHarness.model(EngineHarness.fixture(name)), strategy, cache)));
                }
            }
        }
        return tests.stream();
    }

    private static void refusedAmidRunning(HybridModel model, String strategy, boolean cache) {
        int vocab = model.config().vocabSize();
        EngineCore core = EngineHarness.engine(model, options(strategy).withPrefixCache(cache, 16).withBudget(8, 24));
        int[] prompt = EngineHarness.repetitivePrompt(37, 6, 12, vocab);
        int[] other = EngineHarness.repetitivePrompt(21, 4, 13, vocab);
        int[] ref = EngineHarness.referenceGreedy(model, prompt, 36);
        int[] refOther = EngineHarness.referenceGreedy(model, other, 20);
        Map<String, EngineHarness.Collector> out = new LinkedHashMap<>();
        out.put("good", new EngineHarness.Collector());
        core.add(GenerationRequest.of("good", prompt, greedy(ref.length))
                .withDrafter(EngineHarness.noisyOracle(ref, prompt.length, vocab, 77), K), out.get("good"));
        int steps = 0;
        while (core.hasWork()) {
            if (steps == 1) {
                // mid-prefill (the budget cuts the prompt into chunks)
                assertTrue(core.computedTokensOf("good") < prompt.length);
                assertRefused(core, GenerationRequest.of("good", other, greedy(3)), "id");
                assertRefused(core, GenerationRequest.of("bad-empty", new int[0], greedy(3)), "prompt");
            }
            if (steps == 6) {
                // while it decodes with drafts: a flood of bad requests, then a good one beside it
                assertTrue(core.computedTokensOf("good") > prompt.length);
                assertRefused(core, GenerationRequest.of("good", prompt, greedy(ref.length)), "id");
                assertRefused(core, GenerationRequest.of("bad-vocab", new int[] {vocab + 1}, greedy(3)), "prompt");
                assertRefused(core, GenerationRequest.of("bad-long", prompt, greedy(5000)), "max_tokens");
                assertRefused(core, GenerationRequest.of("bad-strategy", prompt, greedy(3)).withStrategy("nope"),
                        "rollback_strategy");
                out.put("late", new EngineHarness.Collector());
                core.add(GenerationRequest.of("late", other, greedy(refOther.length)), out.get("late"));
                assertRefused(core, GenerationRequest.of("late", other, greedy(3)), "id");
            }
            core.step();
            steps++;
            assertTrue(steps < 10_000);
        }
        assertTrue(steps > 7, "the bad requests came while the good one ran");
        assertEquals(FinishReason.LENGTH, out.get("good").reason);
        assertArrayEquals(ref, out.get("good").output(), "the running request's output is untouched");
        assertEquals(FinishReason.LENGTH, out.get("late").reason);
        assertArrayEquals(refOther, out.get("late").output(), "the good request beside it");
        EngineMetrics m = core.metrics();
        assertEquals(2, m.finished);
        assertEquals(0, m.errors);
        assertEquals(prompt.length + other.length, m.promptTokens, "refused prompts are not counted");
        assertEquals(2, m.strategies.get(strategy).requests, "refused requests count for no strategy");
        assertNoLeaks(core, strategy);
        core.close();
    }

    /**
     * After every request finished, the pools hold only what the prefix cache keeps: its checkpoint
     * slots and its blocks' KV pages.
     */
    private static void assertNoLeaks(EngineCore core, String what) {
        assertTrue(!core.hasWork());
        EngineMetrics m = core.metrics();
        int pagesPerBlock = core.options().prefixBlockSize() / core.options().pageSize();
        int cachedPages = core.store().kv().enabled() ? m.prefixBlocks * pagesPerBlock : 0;
        assertEquals(m.prefixCheckpoints, core.store().pool().usedSlots(), what + ": slots beyond the cache's");
        assertEquals(cachedPages, core.store().kv().usedPages(), what + ": pages beyond the cache's");
        if (!core.options().prefixCaching()) {
            assertEquals(0, core.store().pool().usedSlots(), what + ": slots");
            assertEquals(0, core.store().kv().usedPages(), what + ": pages");
        }
        // and the cache's own holdings are exactly one reference each
        for (EngineCore.CachedCheckpoint c : core.prefixCheckpoints()) {
            assertEquals(1, core.store().pool().refCount(c.slot()), what + ": checkpoint slot held once");
        }
    }

    @Test
    void closingAnEngineWithWorkInFlightAbortsAndFreesEverything() {
        HybridModel model = EngineHarness.model(EngineHarness.fixture("nemotron_h"));
        EngineCore core = EngineHarness.engine(model, options("replay").withPrefixCache(false, 16));
        EngineHarness.Collector running = new EngineHarness.Collector();
        EngineHarness.Collector waiting = new EngineHarness.Collector();
        core.add(GenerationRequest.of("a", new int[] {4, 5, 6, 7}, greedy(30)), running);
        core.step();
        core.step();
        assertTrue(core.abort("a"));
        assertEquals(FinishReason.ABORT, running.reason);
        assertEquals(0, core.store().pool().usedSlots());
        assertEquals(0, core.store().kv().usedPages());
        assertNull(core.strategyOf("a"));
        core.add(GenerationRequest.of("b", new int[] {4, 5}, greedy(3)), waiting);
        core.close();
        assertEquals(FinishReason.ABORT, waiting.reason);
    }
}
