package dev.hyspec.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cpu.CpuBackend;
import dev.hyspec.bench.DecodeBench;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.config.ModelConfig;
import dev.hyspec.model.config.ModelConfig.Block;
import dev.hyspec.model.config.ModelConfigParser;
import dev.hyspec.testing.Fixtures;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Models with generated weights ({@link HybridModel#generate}): finite, deterministic, and their step bytes. */
class GeneratedModelTest {

    static ModelConfig tinyConfig(String fixture) {
        return ModelConfigParser.parse(Checkpoint.open(Fixtures.named(fixture).dir()).config());
    }

    @ParameterizedTest
    @ValueSource(strings = {"nemotron_h", "qwen3_5", "mamba2", "qwen3_next"})
    void logitsAreFiniteAndTheSameForTheSameSeed(String fixture) {
        ModelConfig config = tinyConfig(fixture);
        float[] first = logits(HybridModel.generate(config, new CpuBackend(), 7), config);
        float[] again = logits(HybridModel.generate(config, new CpuBackend(), 7), config);
        float[] other = logits(HybridModel.generate(config, new CpuBackend(), 8), config);
        double max = 0;
        for (float v : first) {
            assertTrue(Float.isFinite(v), "non-finite logit in a generated " + fixture);
            max = Math.max(max, Math.abs(v));
        }
        assertTrue(max > 1e-3 && max < 1e3, fixture + ": logits as large as " + max);
        assertArrayEquals(first, again);
        assertTrue(first[0] != other[0] || first[1] != other[1], "another seed, other weights");
    }

    /** Logits of a 40-token random prompt, then of 8 decoded tokens one at a time. */
    private static float[] logits(HybridModel model, ModelConfig config) {
        Backend b = model.backend();
        int[] prompt = new Random(3).ints(40, 0, config.vocabSize()).toArray();
        try (Sequence seq = model.newSequence(64)) {
            float[] all = b.download(seq.forward(prompt, true));
            for (int i = 0; i < 8; i++) {
                float[] step = b.download(seq.forward(new int[] {(i * 31) % config.vocabSize()}, false));
                float[] grown = java.util.Arrays.copyOf(all, all.length + step.length);
                System.arraycopy(step, 0, grown, all.length, step.length);
                all = grown;
            }
            return all;
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"nemotron_h", "qwen3_5", "mamba2"})
    void decodeWeightBytesCountEveryMatrixAndTheLmHead(String fixture) {
        ModelConfig config = tinyConfig(fixture);
        HybridModel generated = HybridModel.generate(config, new CpuBackend(), 1);
        assertEquals(2 * matrixElementsPerStep(config), generated.decodeWeightBytes());
    }

    @org.junit.jupiter.api.Test
    void benchShapesReadTheirWeightsPerStep() {
        // Nemotron-H-8B: 8.10 B parameters, less the embedding table (0.54 B) and the vectors
        assertEquals(15_124_660_224L, 2 * matrixElementsPerStep(DecodeBench.config("nemotron-h-8b")));
        assertEquals(15_871_246_336L, 2 * matrixElementsPerStep(DecodeBench.config("qwen3.5-9b")));
    }

    /** Elements of every matrix a dense hybrid's decode step reads, from the config alone. */
    static long matrixElementsPerStep(ModelConfig c) {
        long d = c.hiddenSize();
        long n = (long) c.vocabSize() * d;   // LM head (tied or not, it is read whole)
        for (Block b : c.blocks()) {
            n += switch (b.kind()) {
                case MAMBA2 -> {
                    var m = c.mamba2();
                    yield (2L * m.innerSize() + 2L * m.nGroups() * m.stateSize() + m.numHeads()) * d
                            + d * m.innerSize();
                }
                case GATED_DELTA_NET -> {
                    var g = c.gdn();
                    yield (g.convDim() + g.valueDim() + 2L * g.numValueHeads()) * d + d * g.valueDim();
                }
                case ATTENTION -> {
                    var a = c.attention();
                    long q = (long) a.numHeads() * a.headDim();
                    yield (q * (a.outputGate() ? 2 : 1) + 2L * a.numKvHeads() * a.headDim()) * d + d * q;
                }
                case MLP -> (c.mlp().activation() == ModelConfig.Activation.SILU ? 3L : 2L)
                        * c.mlp().intermediateSize() * d;
                case MOE -> throw new IllegalArgumentException("dense models only");
            };
        }
        return n;
    }
}
