package dev.hyspec.state;

import dev.hyspec.backend.StateLayout;

/**
 * Which state layout each kind of row computes in. A slot whose flag differs is converted before its
 * row runs ({@link MambaStatePool#ensureLayout}); new slots start in {@code generate}'s layout.
 */
public record LayoutPolicy(StateLayout prefill, StateLayout generate) {
    /** The layout the model's recurrent kernels read most naturally (Mamba2: VK, Gated DeltaNet: KV). */
    public static LayoutPolicy of(StateLayout natural) {
        return new LayoutPolicy(natural, natural);
    }
}
