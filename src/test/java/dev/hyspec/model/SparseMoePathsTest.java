package dev.hyspec.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.MoeRouting;
import dev.hyspec.backend.Tensor;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.config.BlockKind;
import dev.hyspec.model.config.ModelConfig;
import dev.hyspec.model.config.ModelConfig.Activation;
import dev.hyspec.model.config.ModelConfig.Block;
import dev.hyspec.model.config.ModelConfig.MoeSpec;
import dev.hyspec.model.config.ModelConfigParser;
import dev.hyspec.model.layers.SparseMoe;
import dev.hyspec.state.ReplayStrategy;
import dev.hyspec.testing.Fixtures;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * SparseMoe's two paths give the same numbers: the backend path of decode/verify steps
 * (moeRoute, moeExpertMatmul, moeCombine) and the host-routed per-expert path of prefill chunks,
 * for Qwen3-Next's softmax router (the hf-tiny checkpoint) and a Nemotron-H-style sigmoid router
 * with score bias and group-limited choice (generated weights).
 */
class SparseMoePathsTest {
    private static final int ROWS = 3;
    private static final int TOKENS_PER_ROW = 4;

    @Test
    void softmaxRouterBothPathsAgree() {
        CpuBackend cpu = new CpuBackend();
        Checkpoint ckpt = Checkpoint.open(Fixtures.named("qwen3_next").dir());
        ModelConfig config = ModelConfigParser.parse(ckpt.config());
        Weights w = new Weights(new CheckpointWeights(ckpt, cpu), cpu);
        assertBothPathsAgree(cpu, config, w);
    }

    @Test
    void groupedSigmoidRouterBothPathsAgree() {
        CpuBackend cpu = new CpuBackend();
        ModelConfig config = nemotronStyle();
        Weights w = new Weights(new GeneratedWeights(config, cpu, 11), cpu);
        assertBothPathsAgree(cpu, config, w);
    }

    /** Group-limited choice: every token's experts lie in at most topkGroup groups. */
    @Test
    void groupedSigmoidRoutingKeepsToTheBestGroups() {
        MoeRouting rule = new MoeRouting(true, 3, true, 4, 2, 2.5f, null);
        Random r = new Random(5);
        int experts = 16;
        int tokens = 200;
        float[] logits = new float[tokens * experts];
        for (int i = 0; i < logits.length; i++) {
            logits[i] = (float) r.nextGaussian();
        }
        float[] bias = new float[experts];
        bias[3] = 10f;   // expert 3 wins every time, so group 0 is always kept
        int[] ids = new int[tokens * 3];
        float[] weights = new float[tokens * 3];
        rule.route(logits, experts, bias, ids, weights);
        for (int t = 0; t < tokens; t++) {
            Set<Integer> groups = new HashSet<>();
            float sum = 0;
            for (int k = 0; k < 3; k++) {
                groups.add(ids[t * 3 + k] / 4);
                sum += weights[t * 3 + k];
            }
            assertEquals(3, ids[t * 3], "the biased expert is chosen first");
            assertTrue(groups.size() <= 2 && groups.contains(0), "token " + t + " groups " + groups);
            assertEquals(2.5f, sum, 1e-5f, "renormalised weights times the scaling factor");
        }
    }

    /** A Qwen3-Next-shaped tiny model whose MoE routes as Nemotron-H does (8 experts in 4 groups, top-3 of 2 groups). */
    static ModelConfig nemotronStyle() {
        ModelConfig q = ModelConfigParser.parse(Checkpoint.open(Fixtures.named("qwen3_next").dir()).config());
        MoeSpec moe = new MoeSpec(8, 3, true, 48, 64, Activation.RELU2, true, 4, 2, 2.5f);
        return new ModelConfig(q.architecture(), q.vocabSize(), q.hiddenSize(), q.normEps(), q.normPlusOne(),
                q.tieWordEmbeddings(), q.embeddingName(), q.finalNormName(), q.blocks(), q.mamba2(), q.gdn(),
                q.attention(), q.mlp(), moe, q.maxPositionEmbeddings(), q.eosTokenIds(), q.bosTokenId());
    }

    private static void assertBothPathsAgree(Backend cpu, ModelConfig config, Weights w) {
        Block block = config.blocks().stream().filter(b -> b.kind() == BlockKind.MOE).findFirst().orElseThrow();
        SparseMoe moe = new SparseMoe(w, block.prefix(), config.moe(), config.hiddenSize());
        Random r = new Random(7);
        int tokens = ROWS * TOKENS_PER_ROW;
        float[] xs = new float[tokens * config.hiddenSize()];
        for (int i = 0; i < xs.length; i++) {
            xs[i] = (float) r.nextGaussian();
        }
        Tensor x = cpu.upload(xs, tokens, config.hiddenSize());
        List<BatchRow> rows = new ArrayList<>();
        for (int i = 0; i < ROWS; i++) {
            rows.add(new BatchRow(i, new int[TOKENS_PER_ROW], 10, RowMode.GENERATE, new ReplayStrategy(), new int[] {i},
                    BatchRow.Logits.ALL));
        }
        ForwardBatch ragged = new ForwardBatch(rows);
        ForwardBatch uniform = ForwardBatch.uniform(rows, ROWS, 0);
        assertEquals(0, ragged.tokensPerRow());
        assertEquals(TOKENS_PER_ROW, uniform.tokensPerRow());
        float[] host = cpu.download(moe.forward(x, ragged, null));
        float[] onBackend = cpu.download(moe.forward(x, uniform, null));
        double max = 0;
        for (float v : host) {
            assertTrue(Float.isFinite(v));
            max = Math.max(max, Math.abs(v));
        }
        assertTrue(max > 1e-4, "the layer output is not trivially zero: " + max);
        assertArrayEquals(host, onBackend, "the backend path adds the same products in the same order");
    }
}
