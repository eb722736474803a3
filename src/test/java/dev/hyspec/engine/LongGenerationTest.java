package dev.hyspec.engine;

import static dev.hyspec.engine.EngineHarness.greedy;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.model.HybridModel;
import dev.hyspec.spec.Drafter;
import dev.hyspec.testing.Fixtures.Fixture;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * DESIGN §8 scenario 8: thousands of tokens of greedy speculative decoding, on every fixture
 * (Mamba2, Nemotron-H, Qwen3.5, Qwen3-Next, ...), with both rollback strategies, with the engine's
 * n-gram drafter and with a noisy oracle (K = 4). The output equals the from-scratch reference token
 * for token all the way; the oracle's acceptance rate is the same in the first and the second half
 * (a state that drifted would make the target disagree with the oracle more and more), and both
 * strategies see exactly the same drafts accepted.
 */
class LongGenerationTest {
    private static final int N = 2000;
    private static final int K = 4;
    /** Each oracle draft is wrong with probability 1/3: per step Σ_{i=1..4} (2/3)^i = 1.605 of 4 accepted. */
    private static final double ORACLE_RATE = (2.0 / 3 + 4.0 / 9 + 8.0 / 27 + 16.0 / 81) / 4;

    @TestFactory
    Stream<DynamicTest> thousandsOfTokensStayExactAndAcceptanceStaysStable() {
        return EngineHarness.fixtures().stream()
                .map(f -> DynamicTest.dynamicTest(f.name(), () -> check(f)));
    }

    /** The drafts proposed and accepted at each speculative step, with the output position it started at. */
    private record StepRecord(int position, int proposed, int accepted) {}

    /** Wraps a drafter and records what the verifier did with each proposal. */
    private static final class Recording implements Drafter {
        final Drafter inner;
        final int promptLength;
        final List<StepRecord> steps = new ArrayList<>();
        int position;

        Recording(Drafter inner, int promptLength) {
            this.inner = inner;
            this.promptLength = promptLength;
        }

        @Override
        public int[] propose(int[] tokens, int length, int numDrafts) {
            position = length - promptLength;
            return inner.propose(tokens, length, numDrafts);
        }

        @Override
        public void onAccepted(int numProposed, int numAccepted) {
            steps.add(new StepRecord(position, numProposed, numAccepted));
        }

        double rate(int from, int to) {
            long proposed = 0;
            long accepted = 0;
            for (StepRecord s : steps) {
                if (s.position() >= from && s.position() < to) {
                    proposed += s.proposed();
                    accepted += s.accepted();
                }
            }
            return (double) accepted / proposed;
        }
    }

    private static void check(Fixture f) {
        HybridModel model = EngineHarness.model(f);
        int vocab = model.config().vocabSize();
        // a repetitive prompt gives the n-gram drafter something to match from the start
        int[] prompt = EngineHarness.repetitivePrompt(48, 6, 9, vocab);
        int[] want = EngineHarness.referenceGreedy(model, prompt, N);

        for (String drafter : List.of("ngram", "noisy-oracle")) {
            Map<String, EngineMetrics.StrategyStats> stats = new LinkedHashMap<>();
            Map<String, List<StepRecord>> records = new LinkedHashMap<>();
            for (String strategy : EngineHarness.STRATEGIES) {
                String what = f.name() + " / " + drafter + " / " + strategy;
                EngineOptions options = EngineOptions.defaults().withDrafts(K).withStrategy(strategy, Map.of())
                        .withPrefixCache(false, 16);
                EngineCore core = EngineHarness.engine(model, options);
                GenerationRequest r = GenerationRequest.of("long", prompt, greedy(N));
                Recording rec = null;
                if (drafter.equals("noisy-oracle")) {
                    rec = new Recording(EngineHarness.noisyOracle(want, prompt.length, vocab, 17), prompt.length);
                    r = r.withDrafter(rec, K);
                }
                EngineHarness.Collector out = EngineHarness.run(core, List.of(r)).get("long");
                assertEquals(FinishReason.LENGTH, out.reason, what);
                int[] got = out.output();
                assertEquals(N, got.length, what + ": length");
                for (int i = 0; i < N; i++) {
                    if (got[i] != want[i]) {
                        throw new AssertionError(what + ": first difference from the reference at token " + i
                                + ": expected " + want[i] + " but was " + got[i]);
                    }
                }
                EngineMetrics.StrategyStats st = core.metrics().strategies.get(strategy);
                // the n-gram drafter proposes only where the text repeats itself (a random-weight model's
                // text rarely does, and rarely continues a repeat the same way); the oracle every step
                assertTrue(st.draftTokens > (rec != null ? N : 0), what + ": drafts proposed: " + st.draftTokens);
                stats.put(strategy, st);
                if (rec != null) {
                    records.put(strategy, rec.steps);
                    long proposed = rec.steps.stream().mapToLong(StepRecord::proposed).sum();
                    long accepted = rec.steps.stream().mapToLong(StepRecord::accepted).sum();
                    assertEquals(st.draftTokens, proposed, what + ": metrics count every proposal");
                    assertEquals(st.acceptedDraftTokens, accepted, what + ": metrics count every acceptance");
                    double first = rec.rate(0, N / 2);
                    double second = rec.rate(N / 2, N);
                    String rates = what + ": acceptance first half " + first + ", second half " + second
                            + ", expected about " + ORACLE_RATE;
                    assertTrue(Math.abs(first - ORACLE_RATE) < 0.07 && Math.abs(second - ORACLE_RATE) < 0.07, rates);
                    assertTrue(Math.abs(first - second) < 0.06, rates);
                    assertEquals(st.acceptanceRate(), (double) accepted / proposed, 1e-12);
                }
                core.close();
            }
            EngineMetrics.StrategyStats replay = stats.get(EngineHarness.STRATEGIES.get(0));
            EngineMetrics.StrategyStats copy = stats.get(EngineHarness.STRATEGIES.get(1));
            String what = f.name() + " / " + drafter + ": both strategies";
            assertEquals(replay.generateRows, copy.generateRows, what + ": steps");
            assertEquals(replay.draftTokens, copy.draftTokens, what + ": drafts");
            assertEquals(replay.acceptedDraftTokens, copy.acceptedDraftTokens, what + ": accepted drafts");
            assertEquals(replay.outputTokens, copy.outputTokens, what + ": output tokens");
            if (!records.isEmpty()) {
                assertEquals(records.get(EngineHarness.STRATEGIES.get(0)), records.get(EngineHarness.STRATEGIES.get(1)),
                        what + ": acceptance step by step");
            }
        }
    }
}
