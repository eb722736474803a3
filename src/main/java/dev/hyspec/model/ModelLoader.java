package dev.hyspec.model;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.config.ModelConfig;
import dev.hyspec.model.config.ModelConfig.Block;
import dev.hyspec.model.config.ModelConfigParser;
import dev.hyspec.model.layers.Attention;
import dev.hyspec.model.layers.GatedDeltaNet;
import dev.hyspec.model.layers.Mamba2Mixer;
import dev.hyspec.model.layers.Mixer;
import dev.hyspec.model.layers.Mlp;
import dev.hyspec.model.layers.SparseMoe;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds a {@link HybridModel}: the config decides the blocks, the weights fill them — from a
 * checkpoint, or generated on the backend for a config alone.
 */
final class ModelLoader {
    private ModelLoader() {}

    static HybridModel load(Checkpoint checkpoint, Backend backend) {
        return build(ModelConfigParser.parse(checkpoint.config()), new Weights(new CheckpointWeights(checkpoint, backend),
                backend), backend);
    }

    static HybridModel generate(ModelConfig config, Backend backend, long seed) {
        return build(config, new Weights(new GeneratedWeights(config, backend, seed), backend), backend);
    }

    private static HybridModel build(ModelConfig c, Weights w, Backend backend) {
        int d = c.hiddenSize();
        Tensor embedding = w.matrix(c.embeddingName(), c.vocabSize(), d);
        Tensor lmHead = c.tieWordEmbeddings() && !w.has("lm_head.weight")
                ? embedding : w.matrix("lm_head.weight", c.vocabSize(), d);
        Tensor finalNorm = w.vector(c.finalNormName(), d);
        List<Tensor> norms = new ArrayList<>();
        List<Mixer> mixers = new ArrayList<>();
        int recurrent = 0;
        int attention = 0;
        for (Block b : c.blocks()) {
            norms.add(w.vector(b.normName(), d));
            mixers.add(switch (b.kind()) {
                case MAMBA2 -> new Mamba2Mixer(w, b.prefix(), c.mamba2(), d, c.normEps(), recurrent++);
                case GATED_DELTA_NET -> new GatedDeltaNet(w, b.prefix(), c.gdn(), c.architecture(), d, c.normEps(),
                        recurrent++);
                case ATTENTION -> new Attention(w, b.prefix(), c.attention(), d, c.normEps(), c.normPlusOne(),
                        attention++);
                case MLP -> new Mlp(w, b.prefix(), d, c.mlp().intermediateSize(), c.mlp().activation(),
                        c.mlp().bias());
                case MOE -> new SparseMoe(w, b.prefix(), c.moe(), d);
            });
        }
        // a decode step gathers a few embedding rows but reads the LM head whole
        long stepBytes = w.matrixBytes() - (lmHead == embedding ? 0 : w.matrixBytes(c.embeddingName(), c.vocabSize(), d));
        return new HybridModel(c, backend, embedding, lmHead, finalNorm, norms, mixers, stepBytes);
    }
}
