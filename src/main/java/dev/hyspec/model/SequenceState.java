package dev.hyspec.model;

import dev.hyspec.model.layers.LayerState;
import java.util.List;

/**
 * Everything one sequence carries between forward calls: per block, its recurrent state or KV
 * cache (null for stateless blocks), and {@code numComputedTokens}, the tokens already consumed.
 */
public final class SequenceState {
    private final List<LayerState> layers;
    private int numComputedTokens;

    SequenceState(List<LayerState> layers) {
        this.layers = layers;
    }

    public LayerState layer(int block) {
        return layers.get(block);
    }

    public List<LayerState> layers() {
        return layers;
    }

    public int numComputedTokens() {
        return numComputedTokens;
    }

    void advance(int tokens) {
        numComputedTokens += tokens;
    }
}
