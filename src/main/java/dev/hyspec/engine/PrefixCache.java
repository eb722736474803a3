package dev.hyspec.engine;

import dev.hyspec.state.KvBlockPool;
import dev.hyspec.state.MambaStatePool;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Prefix caching in "align" mode (DESIGN §6). The cache is a tree of blocks of {@code B} tokens keyed
 * by the whole prefix they end (a hash chain, checked token by token). A block holds references to
 * the KV pages of its {@code B} positions and, when the engine had the exact state there, a state-pool
 * slot with {@code S(k·B)} and {@code U(k·B)}. A lookup walks the chain of a prompt and returns the
 * deepest block that has a state; the hit's pages are shared by reference count, its state is forked.
 * Eviction is least-recently-used; a hit touches its chain from the deepest block up, so the blocks
 * near the root — the ones every longer prefix needs — go last.
 */
final class PrefixCache {
    /** One cached block: the prefix {@code tokens[0 … k·B)} ends here. */
    static final class Block {
        final long key;
        final Block parent;
        final int depth;          // k
        final int[] tokens;       // this block's B tokens
        final int[] pages;        // KV pages of this block's positions
        int stateSlot = -1;       // S(k·B), U(k·B), or -1
        final List<Block> children = new ArrayList<>();
        long lastUsed;
        boolean live = true;

        Block(long key, Block parent, int[] tokens, int[] pages) {
            this.key = key;
            this.parent = parent;
            this.depth = parent == null ? 1 : parent.depth + 1;
            this.tokens = tokens;
            this.pages = pages;
        }

        /** Tokens covered from the start of the sequence. */
        int end(int blockSize) {
            return depth * blockSize;
        }
    }

    /** A lookup result: the deepest block with a state, and the chain of blocks from the root to it. */
    record Hit(Block block, List<Block> chain) {}

    private final int blockSize;
    private final MambaStatePool pool;
    private final KvBlockPool kv;
    private final Map<Long, Block> blocks = new HashMap<>();
    private long clock;
    private long queries;
    private long queriedTokens;
    private long hits;
    private long hitTokens;
    private long evictions;

    PrefixCache(int blockSize, MambaStatePool pool, KvBlockPool kv) {
        this.blockSize = blockSize;
        this.pool = pool;
        this.kv = kv;
    }

    int blockSize() {
        return blockSize;
    }

    static long key(Block parent, int[] tokens, int from, int to) {
        long h = parent == null ? 0x9E3779B97F4A7C15L : parent.key;
        for (int i = from; i < to; i++) {
            h = (h ^ tokens[i]) * 0x100000001B3L;
            h ^= h >>> 29;
        }
        return h;
    }

    /** The child of {@code parent} whose tokens are {@code tokens[from … from+B)}, if cached. */
    Block child(Block parent, int[] tokens, int from) {
        Block b = blocks.get(key(parent, tokens, from, from + blockSize));
        if (b == null || b.parent != parent
                || !Arrays.equals(b.tokens, 0, blockSize, tokens, from, from + blockSize)) {
            return null;
        }
        return b;
    }

    /**
     * The deepest cached state for a prefix of {@code tokens[0 … limit)}, or null. Counts the query;
     * the engine counts the hit with {@link #recordHit} once it has used it.
     */
    Hit lookup(int[] tokens, int limit) {
        queries++;
        queriedTokens += limit;
        List<Block> chain = new ArrayList<>();
        Block parent = null;
        int best = -1;
        for (int from = 0; from + blockSize <= limit; from += blockSize) {
            Block b = child(parent, tokens, from);
            if (b == null) {
                break;
            }
            chain.add(b);
            if (b.stateSlot >= 0 || pool.numLayers() == 0) {
                best = chain.size() - 1;
            }
            parent = b;
        }
        if (best < 0) {
            return null;
        }
        List<Block> used = List.copyOf(chain.subList(0, best + 1));
        for (int i = used.size() - 1; i >= 0; i--) {
            used.get(i).lastUsed = ++clock;
        }
        return new Hit(used.get(best), used);
    }

    /** Counts a hit the engine used (a fork that found no free slot is not one). */
    void recordHit(Hit hit) {
        hits++;
        hitTokens += hit.block().end(blockSize);
    }

    /**
     * Records block {@code tokens[from … from+B)} after {@code parent}, holding a reference to each of
     * {@code pages}; returns the cached block (an existing identical one if there is one).
     */
    Block insert(Block parent, int[] tokens, int from, int[] pages) {
        if (parent != null && !parent.live) {
            return null;
        }
        Block existing = child(parent, tokens, from);
        if (existing != null) {
            existing.lastUsed = ++clock;
            return existing;
        }
        long key = key(parent, tokens, from, from + blockSize);
        Block stale = blocks.get(key);
        if (stale != null) {
            drop(stale);
        }
        Block b = new Block(key, parent, Arrays.copyOfRange(tokens, from, from + blockSize), pages.clone());
        for (int p : b.pages) {
            kv.retain(p);
        }
        b.lastUsed = ++clock;
        blocks.put(key, b);
        if (parent != null) {
            parent.children.add(b);
        }
        return b;
    }

    /**
     * Frees the state slot of the least recently used block that has one (its KV pages stay cached,
     * so deeper blocks stay reachable); false if no block holds a slot.
     */
    boolean evictStateSlot() {
        Block victim = lru(b -> b.stateSlot >= 0);
        if (victim == null) {
            return false;
        }
        pool.release(victim.stateSlot);
        victim.stateSlot = -1;
        evictions++;
        return true;
    }

    /**
     * Drops the least recently used block whose pages only the cache holds, with the blocks below it
     * (they are unreachable without it); false if there is none.
     */
    boolean evictPages() {
        Block victim = lru(b -> {
            for (int p : b.pages) {
                if (kv.refCount(p) == 1) {
                    return true;
                }
            }
            return false;
        });
        if (victim == null) {
            return false;
        }
        drop(victim);
        evictions++;
        return true;
    }

    private Block lru(java.util.function.Predicate<Block> useful) {
        Block victim = null;
        for (Block b : blocks.values()) {
            if (useful.test(b) && (victim == null || b.lastUsed < victim.lastUsed)) {
                victim = b;
            }
        }
        return victim;
    }

    private void drop(Block b) {
        if (!b.live) {
            return;
        }
        b.live = false;
        for (Block c : List.copyOf(b.children)) {
            drop(c);
        }
        if (b.parent != null) {
            b.parent.children.remove(b);
        }
        if (blocks.get(b.key) == b) {
            blocks.remove(b.key);
        }
        for (int p : b.pages) {
            kv.release(p);
        }
        if (b.stateSlot >= 0) {
            pool.release(b.stateSlot);
            b.stateSlot = -1;
        }
    }

    /** Drops every block (and its pages and slots). */
    void clear() {
        for (Block b : List.copyOf(blocks.values())) {
            drop(b);
        }
    }

    /** The blocks holding a state, each with its whole prefix. */
    List<EngineCore.CachedCheckpoint> checkpoints() {
        List<EngineCore.CachedCheckpoint> out = new ArrayList<>();
        for (Block b : blocks.values()) {
            if (b.stateSlot >= 0) {
                int[] prefix = new int[b.end(blockSize)];
                for (Block c = b; c != null; c = c.parent) {
                    System.arraycopy(c.tokens, 0, prefix, (c.depth - 1) * blockSize, blockSize);
                }
                out.add(new EngineCore.CachedCheckpoint(prefix, b.stateSlot));
            }
        }
        return out;
    }

    int size() {
        return blocks.size();
    }

    int stateCheckpoints() {
        return (int) blocks.values().stream().filter(b -> b.stateSlot >= 0).count();
    }

    long queries() {
        return queries;
    }

    long queriedTokens() {
        return queriedTokens;
    }

    long hits() {
        return hits;
    }

    long hitTokens() {
        return hitTokens;
    }

    long evictions() {
        return evictions;
    }
}
