package dev.hyspec.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.bench.DecodeBench.ModelSpec;
import dev.hyspec.bench.DecodeBench.Report;
import dev.hyspec.bench.DecodeBench.Settings;
import dev.hyspec.bench.DecodeRun.Workload;
import dev.hyspec.bench.DecodeRun.Measured;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.HybridModel;
import dev.hyspec.state.IntermediateCopyStrategy;
import dev.hyspec.state.ReplayStrategy;
import dev.hyspec.model.config.BlockKind;
import dev.hyspec.model.config.ModelConfig;
import dev.hyspec.model.config.ModelConfigParser;
import dev.hyspec.testing.Fixtures;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** {@link DecodeBench}'s measuring core on the CPU with tiny generated models, and its model shapes. */
class DecodeBenchTest {
    private static final Set<String> RESULT_KEYS = Set.of("model", "batch", "mode", "k", "tokensPerSecond", "stepMs",
            "acceptanceRate", "weightBytes", "floorMs", "ratio");

    @Test
    void measuresEveryModelBatchAndModeAndWritesTheJson() throws Exception {
        List<ModelSpec> models = List.of(spec("nemotron_h"), spec("qwen3_5"));
        Settings tiny = new Settings(new Workload(24, 6, 5), new Workload(12, 4, 3), 1 << 16, 2);
        List<Report> progress = new ArrayList<>();
        Report report = DecodeBench.run(CpuBackend::new, models, List.of(1, 3), tiny, DecodeBench.DraftSource.NGRAM,
                false, false, progress::add);
        assertEquals(2 * 2 * 3, report.results().size());
        assertEquals(report.results().size(), progress.size(), "the report is handed on after every result");

        JsonNode root = DecodeBench.parse(DecodeBench.toJson(report));
        assertEquals(Set.of("machine", "copyBandwidthGBs", "results"), fieldNames(root));
        assertEquals("cpu", root.get("machine").get("backend").asText());
        assertEquals("ngram", root.get("machine").get("drafter").asText());
        assertTrue(root.get("copyBandwidthGBs").asDouble() > 0);
        for (JsonNode r : root.get("results")) {
            assertEquals(RESULT_KEYS, fieldNames(r));
            String mode = r.get("mode").asText();
            assertTrue(Set.of("no-spec", "replay", "intermediate-copy").contains(mode), mode);
            assertEquals(mode.equals("no-spec") ? 0 : 3, r.get("k").asInt());
            for (String key : List.of("tokensPerSecond", "stepMs", "floorMs", "ratio")) {
                assertTrue(r.get(key).isNumber() && r.get(key).asDouble() > 0, key + " of " + r);
            }
            double acceptance = r.get("acceptanceRate").asDouble();
            assertTrue(acceptance >= 0 && acceptance <= 1, "acceptance " + acceptance);
            assertTrue(r.get("weightBytes").asLong() > 0);
            assertEquals(r.get("stepMs").asDouble() / r.get("floorMs").asDouble(), r.get("ratio").asDouble(), 1e-9);
        }
    }

    @Test
    void oracleDraftsAreTheNoSpecOutputsAndAllAccepted() {
        ModelSpec spec = spec("nemotron_h");
        HybridModel model = HybridModel.generate(spec.config(), new CpuBackend(), 5);
        Workload w = new Workload(20, 5, 9);
        Measured plain = DecodeRun.run(model, 3, DecodeRun.Mode.NO_SPEC, w, 11, null);
        assertEquals(0, plain.draftsPerRow());
        for (String strategy : List.of(ReplayStrategy.ID, IntermediateCopyStrategy.ID)) {
            Measured spec3 = DecodeRun.run(model, 3, DecodeRun.Mode.spec(strategy, 3), w, 11, plain.outputs());
            assertArrayEquals(plain.outputs(), spec3.outputs(), strategy + ": greedy output with drafts");
            assertEquals(1.0, spec3.acceptanceRate(), strategy);
            assertTrue(spec3.draftsPerRow() > 2, strategy + ": drafts per row " + spec3.draftsPerRow());
            assertTrue(spec3.decodeSteps() < plain.decodeSteps(), strategy + ": fewer steps with accepted drafts");
        }
    }

    /**
     * Forced acceptance: drafts that are not the greedy continuation (each token of it shifted by one)
     * are all accepted and emitted, so every token that was proposed as a draft is the shifted one;
     * the others (the first token, from prefill, and each step's bonus) come from the model.
     */
    @Test
    void forcedAcceptanceEmitsEveryDraft() {
        ModelSpec spec = spec("nemotron_h");
        HybridModel model = HybridModel.generate(spec.config(), new CpuBackend(), 5);
        Workload w = new Workload(20, 5, 13);
        Measured plain = DecodeRun.run(model, 2, DecodeRun.Mode.NO_SPEC, w, 11, null);
        int vocab = spec.config().vocabSize();
        int[][] shifted = new int[plain.outputs().length][];
        for (int r = 0; r < shifted.length; r++) {
            shifted[r] = plain.outputs()[r].clone();
            for (int i = 0; i < shifted[r].length; i++) {
                shifted[r][i] = 3 + (shifted[r][i] - 3 + 1) % (vocab - 3);
            }
        }
        for (String strategy : List.of(ReplayStrategy.ID, IntermediateCopyStrategy.ID)) {
            Measured forced = DecodeRun.run(model, 2, DecodeRun.Mode.spec(strategy, 3), w, 11, shifted, true);
            assertEquals(1.0, forced.acceptanceRate(), strategy);
            for (int r = 0; r < shifted.length; r++) {
                int[] out = forced.outputs()[r];
                // position 0 comes from prefill; then each step emits 3 drafts and a bonus token
                for (int i = 1; i < out.length; i++) {
                    if (i % 4 != 0) {
                        assertEquals(shifted[r][i], out[i], strategy + " request " + r + " position " + i);
                    }
                }
            }
        }
    }

    /**
     * Forced acceptance at a rate: each draft is accepted with probability p given the ones before it
     * were, so a row of K = 3 drafts accepts p + p² + p³ of them on average; at 0 none is accepted,
     * and the tokens emitted are still the drafts up to the first rejection, then a token that is not
     * the rejected draft.
     */
    @Test
    void forcedAcceptanceAtARate() {
        ModelSpec spec = spec("nemotron_h");
        HybridModel model = HybridModel.generate(spec.config(), new CpuBackend(), 5);
        Workload w = new Workload(20, 5, 61);
        Measured plain = DecodeRun.run(model, 2, DecodeRun.Mode.NO_SPEC, w, 11, null);
        Measured none = DecodeRun.run(model, 2, DecodeRun.Mode.spec(ReplayStrategy.ID, 3), w, 11, plain.outputs(), 0.0,
                null);
        assertEquals(0.0, none.acceptanceRate());
        double p = 0.6;
        Measured some = DecodeRun.run(model, 2, DecodeRun.Mode.spec(ReplayStrategy.ID, 3), w, 11, plain.outputs(), p,
                null);
        double expected = (p + p * p + p * p * p) / 3;
        assertTrue(Math.abs(some.acceptanceRate() - expected) < 0.12,
                "acceptance " + some.acceptanceRate() + " at rate " + p + ", expected about " + expected);
        for (int[] out : some.outputs()) {
            assertEquals(w.maxTokens(), out.length);
        }
        assertThrows(IllegalArgumentException.class, () -> DecodeRun.run(model, 1,
                DecodeRun.Mode.spec(ReplayStrategy.ID, 3), w, 11, plain.outputs(), 1.5, null));
    }

    /** Prompts of real text repeat a phrase-long window of each text; later requests start further in. */
    @Test
    void textPromptsRepeatWindowsOfTheTexts() {
        int[][] texts = {java.util.stream.IntStream.range(100, 140).toArray(), {7, 8, 9, 10, 11, 12}};
        Workload w = new Workload(14, 6, 4).withTexts(texts);
        assertArrayEquals(new int[] {100, 101, 102, 103, 104, 105, 100, 101, 102, 103, 104, 105, 100, 101},
                DecodeRun.textPrompt(w, 0));
        assertArrayEquals(new int[] {7, 8, 9, 10, 11, 12, 7, 8, 9, 10, 11, 12, 7, 8}, DecodeRun.textPrompt(w, 1));
        assertEquals(105, DecodeRun.textPrompt(w, 2)[0]);   // request 2: text 0 again, five tokens in
        assertThrows(IllegalArgumentException.class,
                () -> DecodeRun.textPrompt(new Workload(14, 7, 4).withTexts(texts), 1));
    }

    /** The trained model's texts: each reference prompt with its greedy continuation. */
    @Test
    void trainedModelTextsAreItsReferencePromptsAndContinuations() {
        java.nio.file.Path dir = java.nio.file.Path.of(dev.hyspec.engine.ModelRegistry.EMBEDDED_MODEL);
        int[][] texts = DecodeBench.texts(dir);
        assertEquals(4, texts.length);
        for (int[] t : texts) {
            assertTrue(t.length >= 16 + 5, "a text of " + t.length + " tokens");
        }
        assertEquals(1149, texts[0][0]);   // reference.json prompts[0][0]
    }

    @Test
    void benchShapesAreNemotronH8bAndQwen35With9bShapes() {
        ModelConfig n = DecodeBench.config("nemotron-h-8b");
        assertEquals(52, n.blocks().size());
        assertEquals(24, count(n, BlockKind.MAMBA2));
        assertEquals(4, count(n, BlockKind.ATTENTION));
        assertEquals(24, count(n, BlockKind.MLP));
        assertEquals(128, n.mamba2().numHeads());
        assertEquals(1024, n.mamba2().normGroupSize());   // H·P / G

        ModelConfig q = DecodeBench.config("qwen3.5-9b");
        assertEquals(64, q.blocks().size());   // a token mixer and an MLP per layer
        assertEquals(24, count(q, BlockKind.GATED_DELTA_NET));
        assertEquals(8, count(q, BlockKind.ATTENTION));
        assertEquals(64, q.attention().rotaryDim());
        assertTrue(q.attention().outputGate());
        assertEquals(248_320, q.vocabSize());
    }

    private static ModelSpec spec(String fixture) {
        return new ModelSpec("tiny-" + fixture,
                ModelConfigParser.parse(Checkpoint.open(Fixtures.named(fixture).dir()).config()));
    }

    private static long count(ModelConfig c, BlockKind kind) {
        return c.blocks().stream().filter(b -> b.kind() == kind).count();
    }

    private static Set<String> fieldNames(JsonNode node) {
        Set<String> names = new java.util.HashSet<>();
        for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
            names.add(it.next());
        }
        return names;
    }
}
