package dev.hyspec.state;

/**
 * Everything a forward pass reads and writes besides the weights: the recurrent state pool, the
 * paged KV cache and the layout each kind of row runs in.
 */
public record StateStore(MambaStatePool pool, KvBlockPool kv, LayoutPolicy layouts) implements AutoCloseable {
    @Override
    public void close() {
        pool.close();
        kv.close();
    }
}
