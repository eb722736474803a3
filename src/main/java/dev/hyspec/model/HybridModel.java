package dev.hyspec.model;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import dev.hyspec.checkpoint.Checkpoint;
import dev.hyspec.model.config.ModelConfig;
import dev.hyspec.model.config.ModelConfig.Block;
import dev.hyspec.model.layers.LayerState;
import dev.hyspec.model.layers.Mixer;
import java.util.ArrayList;
import java.util.List;

/**
 * A causal LM made of pre-norm residual blocks: {@code x ← x + mixer(rmsnorm(x))} for every block,
 * then a final RMSNorm and the LM head. The same forward serves prefill (whole prompt or a chunk)
 * and decode (one token): recurrent blocks continue from the sequence's state.
 */
public final class HybridModel {
    private final ModelConfig config;
    private final Backend backend;
    private final Tensor embedding;    // [V, D]
    private final Tensor lmHead;       // [V, D]
    private final Tensor finalNorm;    // [D]
    private final List<Tensor> norms;  // per block [D]
    private final List<Mixer> mixers;  // per block

    HybridModel(ModelConfig config, Backend backend, Tensor embedding, Tensor lmHead, Tensor finalNorm,
                List<Tensor> norms, List<Mixer> mixers) {
        this.config = config;
        this.backend = backend;
        this.embedding = embedding;
        this.lmHead = lmHead;
        this.finalNorm = finalNorm;
        this.norms = norms;
        this.mixers = mixers;
    }

    /** Loads a checkpoint folder onto a backend (see {@link ModelLoader}). */
    public static HybridModel load(Checkpoint checkpoint, Backend backend) {
        return ModelLoader.load(checkpoint, backend);
    }

    public ModelConfig config() {
        return config;
    }

    public Backend backend() {
        return backend;
    }

    /** A fresh sequence: zeroed recurrent states, empty KV caches, no tokens consumed. */
    public SequenceState newSequence() {
        List<LayerState> states = new ArrayList<>();
        for (Mixer m : mixers) {
            states.add(m.newState());
        }
        return new SequenceState(states);
    }

    /**
     * Consumes {@code tokens} at positions {@code L … L+T−1} ({@code L = seq.numComputedTokens()}),
     * advancing the sequence's state, and returns the logits {@code [T, V]} of every position, or
     * {@code [1, V]} of the last one only when {@code allLogits} is false.
     */
    public Tensor forward(SequenceState seq, int[] tokens, boolean allLogits) {
        int past = seq.numComputedTokens();
        int count = tokens.length;
        if (count == 0) {
            throw new IllegalArgumentException("forward needs at least one token");
        }
        int[] positions = new int[count];
        for (int t = 0; t < count; t++) {
            positions[t] = past + t;
        }
        int hidden = config.hiddenSize();
        // embedding: x [T, D]
        Tensor x = backend.zeros(count, hidden);
        backend.embedding(tokens, embedding, x);
        Tensor normed = backend.zeros(count, hidden);
        for (Block b : config.blocks()) {
            // pre-norm, mixer, residual
            backend.rmsNorm(x, norms.get(b.index()), hidden, config.normEps(), config.normPlusOne(), normed);
            Tensor y = mixers.get(b.index()).forward(normed, seq.layer(b.index()), past, positions);
            backend.add(x, y, x);
            backend.free(y);
        }
        seq.advance(count);
        // final norm and LM head
        Tensor last = x;
        if (!allLogits && count > 1) {
            last = backend.zeros(1, hidden);
            backend.copyRows(x, count - 1, last, 0, 1);
        }
        Tensor lastNormed = backend.zeros(last.rows(), hidden);
        backend.rmsNorm(last, finalNorm, hidden, config.normEps(), config.normPlusOne(), lastNormed);
        Tensor logits = backend.zeros(last.rows(), config.vocabSize());
        backend.matmul(lastNormed, lmHead, null, logits);
        backend.free(x);
        backend.free(normed);
        backend.free(lastNormed);
        if (last != x) {
            backend.free(last);
        }
        return logits;
    }
}
