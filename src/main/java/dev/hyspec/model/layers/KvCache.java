package dev.hyspec.model.layers;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import java.util.List;

/**
 * Keys and values of one attention layer for one sequence, row {@code i} = position {@code i};
 * grows by doubling as the sequence does.
 */
public final class KvCache implements LayerState {
    private final Backend backend;
    private final int width;       // Hkv · D
    private Tensor keys;           // [capacity, Hkv·D]
    private Tensor values;         // [capacity, Hkv·D]

    public KvCache(Backend backend, int width, int initialCapacity) {
        this.backend = backend;
        this.width = width;
        this.keys = backend.zeros(initialCapacity, width);
        this.values = backend.zeros(initialCapacity, width);
    }

    public Tensor keys() {
        return keys;
    }

    public Tensor values() {
        return values;
    }

    public int capacity() {
        return keys.rows();
    }

    /** Makes room for positions {@code [0, length)}, keeping what is stored. */
    public void ensureCapacity(int length) {
        if (length <= capacity()) {
            return;
        }
        int cap = Math.max(length, 2 * capacity());
        keys = grow(keys, cap);
        values = grow(values, cap);
    }

    private Tensor grow(Tensor old, int cap) {
        Tensor t = backend.zeros(cap, width);
        backend.copyRows(old, 0, t, 0, old.rows());
        backend.free(old);
        return t;
    }

    @Override
    public List<Tensor> tensors() {
        return List.of(keys, values);
    }
}
