package dev.hyspec.model.config;

/** What mixes the residual stream in one block (pre-norm, mixer, residual add). */
public enum BlockKind {
    /** Mamba2 mixer: a recurrent layer with conv and SSM state. */
    MAMBA2,
    /** Gated DeltaNet: a recurrent layer with conv and delta-rule state. */
    GATED_DELTA_NET,
    /** Causal self-attention with a KV cache. */
    ATTENTION,
    /** Dense MLP (relu² or SwiGLU). */
    MLP,
    /** Sparse mixture of experts (with a shared expert). */
    MOE
}
