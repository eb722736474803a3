package dev.hyspec.model;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.HashUniform;
import dev.hyspec.backend.Tensor;
import dev.hyspec.model.config.ModelConfig;
import java.util.Arrays;

/**
 * Random parameters for a config, made where they live: matrices as bf16 on the backend
 * ({@link Backend#randomWeight}, no host copy of their bytes), vectors as float32 from the same
 * counter-based hash on the host. Every tensor draws from its own stream, seeded by the model seed
 * and its checkpoint name, so a model is the same on every backend and in every run.
 *
 * <p>Ranges keep a deep stack finite and its recurrences stable (after the initialisations of
 * mamba_ssm and HF {@code modeling_nemotron_h.py} / {@code modeling_qwen3_5.py}):
 * <ul>
 *   <li>matrices {@code [out, in]}: uniform in {@code ±1/√in} (fan-in scaling), those that write
 *       into the residual stream further by {@code 1/√blocks} ({@link #branchScale});</li>
 *   <li>RMSNorm weights near 1 ({@code ±0.1}; near 0 where the config stores them zero-centred,
 *       except the recurrent mixers' gated norms, which are applied as stored);</li>
 *   <li>{@code A_log} in {@code [0.1, 2.7]} ({@code A = −exp(A_log)} in {@code [−15, −1.1]});</li>
 *   <li>{@code dt_bias} in {@code [−6.7, −2.3]} ({@code softplus} gives dt in about {@code [0.001, 0.1]});</li>
 *   <li>{@code D} near 1; conv weights {@code ±1/√W}; biases {@code ±0.02}.</li>
 * </ul>
 */
final class GeneratedWeights implements WeightSource {
    private final ModelConfig config;
    private final Backend backend;
    private final long seed;

    GeneratedWeights(ModelConfig config, Backend backend, long seed) {
        this.config = config;
        this.backend = backend;
        this.seed = seed;
    }

    @Override
    public Tensor matrix(String name, int rows, int cols) {
        return backend.randomWeight(HashUniform.seed(seed, name), 0f, fanIn(cols) * branchScale(name), rows, cols);
    }

    /**
     * The projections that write into the residual stream (a mixer's {@code out_proj} / {@code o_proj},
     * an MLP's {@code down_proj}) are scaled by {@code 1/√blocks}, the depth-scaled initialisation of
     * deep pre-norm stacks: the stream's variance then stays of the order of the embedding's at any
     * depth. (It does not make greedy tokens robust to float32 summation-order differences between
     * kernels: on the bench shapes the top logits of a random model still lie close enough for such
     * a difference to change a token within tens of steps; see {@code SpecConsistency}.)
     */
    private float branchScale(String name) {
        boolean writesResidual = name.endsWith("out_proj.weight") || name.endsWith("o_proj.weight")
                || name.endsWith("down_proj.weight");
        return writesResidual ? (float) (1 / Math.sqrt(config.blocks().size())) : 1f;
    }

    /** A row subset gets a stream of its own (the rows asked for, not the rows of a full matrix). */
    @Override
    public Tensor matrixRows(String name, int rows, int cols, int[] rowIndex) {
        long s = HashUniform.seed(seed, name + "#rows" + Arrays.hashCode(rowIndex));
        return backend.randomWeight(s, 0f, fanIn(cols), rowIndex.length, cols);
    }

    @Override
    public int elementBytes(String name) {
        return 2;
    }

    @Override
    public float[] values(String name, int... shape) {
        int n = 1;
        for (int d : shape) {
            n *= d;
        }
        float center;
        float scale;
        if (name.endsWith("A_log")) {
            center = 1.4f;
            scale = 1.3f;
        } else if (name.endsWith("dt_bias")) {
            center = -4.5f;
            scale = 2.2f;
        } else if (name.endsWith(".D")) {
            center = 1f;
            scale = 0.1f;
        } else if (name.endsWith("conv1d.weight")) {
            center = 0f;
            scale = fanIn(shape[shape.length - 1]);
        } else if (name.endsWith("bias")) {
            center = 0f;
            scale = 0.02f;
        } else if (name.endsWith("norm.weight") || name.endsWith("norm_f.weight") || name.endsWith("layernorm.weight")) {
            boolean gated = name.endsWith("mixer.norm.weight") || name.endsWith("linear_attn.norm.weight");
            center = config.normPlusOne() && !gated ? 0f : 1f;
            scale = 0.1f;
        } else {
            throw new IllegalArgumentException("no generation rule for parameter " + name);
        }
        long s = HashUniform.seed(seed, name);
        float[] out = new float[n];
        for (int i = 0; i < n; i++) {
            out[i] = HashUniform.value(s, i, center, scale);
        }
        return out;
    }

    /** Generated models have biases where their config says so, and an LM head unless it is tied. */
    @Override
    public boolean has(String name) {
        return !(name.equals("lm_head.weight") && config.tieWordEmbeddings());
    }

    private static float fanIn(int in) {
        return (float) (1 / Math.sqrt(in));
    }
}
