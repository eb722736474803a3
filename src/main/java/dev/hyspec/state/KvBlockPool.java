package dev.hyspec.state;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.Tensor;
import java.util.ArrayDeque;
import java.util.Deque;

/**
 * Paged KV cache for the attention layers: {@code numPages} pages of {@code pageSize} positions,
 * shared by every sequence through its block table (page ids in position order). Pages are
 * reference-counted so a prefix-cache hit can share full pages between sequences; a page returns
 * to the free list when its last holder releases it.
 *
 * <p>Per attention layer the keys and values are one tensor each,
 * {@code [numPages·pageSize, Hkv·D]}; position {@code p} of a sequence lives in row
 * {@code table[p / pageSize]·pageSize + p % pageSize}. Only the engine thread touches a pool.
 */
public final class KvBlockPool implements AutoCloseable {
    private final Backend backend;
    private final int pageSize;
    private final int numPages;
    private final Tensor[] keys;
    private final Tensor[] values;
    private final int[] refCount;
    private final Deque<Integer> free = new ArrayDeque<>();

    /**
     * @param layerWidths per attention layer, {@code Hkv·D}
     */
    public KvBlockPool(Backend backend, int[] layerWidths, int pageSize, int numPages) {
        if (pageSize <= 0 || numPages <= 0) {
            throw new IllegalArgumentException("KV pool needs a positive page size and page count, got "
                    + pageSize + " and " + numPages);
        }
        this.backend = backend;
        this.pageSize = pageSize;
        this.numPages = layerWidths.length == 0 ? 0 : numPages;
        this.keys = new Tensor[layerWidths.length];
        this.values = new Tensor[layerWidths.length];
        for (int l = 0; l < layerWidths.length; l++) {
            keys[l] = backend.zeros(this.numPages * pageSize, layerWidths[l]);
            values[l] = backend.zeros(this.numPages * pageSize, layerWidths[l]);
        }
        this.refCount = new int[this.numPages];
        for (int p = 0; p < this.numPages; p++) {
            free.add(p);
        }
    }

    /** True when the model has attention layers (a pure-recurrent model needs no pages). */
    public boolean enabled() {
        return keys.length > 0;
    }

    public int pageSize() {
        return pageSize;
    }

    public int numPages() {
        return numPages;
    }

    public int freePages() {
        return free.size();
    }

    public int usedPages() {
        return numPages - free.size();
    }

    public Tensor keys(int layer) {
        return keys[layer];
    }

    public Tensor values(int layer) {
        return values[layer];
    }

    /** Pages needed to hold {@code positions} positions. */
    public int pagesFor(int positions) {
        return enabled() ? (positions + pageSize - 1) / pageSize : 0;
    }

    /** A fresh page (reference count 1), or -1 when none is free. */
    public int allocate() {
        Integer p = free.poll();
        if (p == null) {
            return -1;
        }
        refCount[p] = 1;
        return p;
    }

    /** One more holder of {@code page}. */
    public void retain(int page) {
        if (refCount[page] <= 0) {
            throw new IllegalStateException("page " + page + " is free");
        }
        refCount[page]++;
    }

    /** One holder fewer; the page is free again when none is left. */
    public void release(int page) {
        if (refCount[page] <= 0) {
            throw new IllegalStateException("page " + page + " released twice");
        }
        if (--refCount[page] == 0) {
            free.add(page);
        }
    }

    public int refCount(int page) {
        return refCount[page];
    }

    @Override
    public void close() {
        for (int l = 0; l < keys.length; l++) {
            backend.free(keys[l]);
            backend.free(values[l]);
        }
    }
}
