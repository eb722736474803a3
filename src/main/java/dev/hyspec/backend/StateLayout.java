package dev.hyspec.backend;

/**
 * How a recurrent state matrix is stored per head (DESIGN §5): {@code KV} is {@code [key, value]}
 * (value contiguous: Gated DeltaNet as in HF/fla, Mamba2 as {@code [N, P]}), {@code VK} is
 * {@code [value, key]} (key contiguous: Mamba2 as in mamba_ssm, {@code [P, N]}).
 */
public enum StateLayout {
    KV,
    VK;

    public StateLayout other() {
        return this == KV ? VK : KV;
    }
}
