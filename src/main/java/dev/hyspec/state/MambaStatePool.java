package dev.hyspec.state;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.StateLayout;
import dev.hyspec.backend.Tensor;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The recurrent state of every sequence (and every prefix-cache checkpoint), in slots: per slot
 * and recurrent layer a conv window {@code [convDim, W−1]} and a state {@code heads × [key, value]},
 * plus the buffers each rollback strategy attaches to the slot ({@link SlotWorkspace}).
 *
 * <p><b>Layout.</b> Each slot carries a flag saying whether its states are stored {@code KV} or
 * {@code VK} (DESIGN §5). {@link #alloc} zeroes the slot and resets the flag to the pool's
 * allocation layout; {@link #copy} and {@link #fork} carry the flag with the data;
 * {@link #ensureLayout} converts a slot in place when a kernel needs the other layout. Nothing
 * else changes a flag, so the flag always describes the data.
 *
 * <p>Slots are reference-counted: {@link #alloc} and {@link #fork} return a slot held once,
 * {@link #retain} adds a holder, {@link #release} drops one and frees the slot with the last.
 * Only the engine thread touches a pool.
 *
 * <p>Besides its {@code capacity} slots the pool keeps one more, {@link #paddingSlot()}, that is never
 * allocated: padding rows of a batched step (rows added to fill a captured graph's batch size) point
 * there, so they neither read nor write a real slot (DESIGN I6).
 */
public final class MambaStatePool implements AutoCloseable {
    private final Backend backend;
    private final List<RecurrentShape> layers;
    private final int capacity;
    private final StateLayout allocLayout;
    private final Tensor[][] conv;      // [layer][slot]
    private final Tensor[][] ssm;       // [layer][slot]
    private final StateLayout[] layout;
    private final int[] refCount;
    private final Deque<Integer> free = new ArrayDeque<>();
    private final List<Map<String, SlotWorkspace>> workspaces;
    private long conversions;

    public MambaStatePool(Backend backend, List<RecurrentShape> layers, int capacity, StateLayout allocLayout) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("state pool capacity must be positive, got " + capacity);
        }
        this.backend = backend;
        this.layers = List.copyOf(layers);
        this.capacity = capacity;
        this.allocLayout = allocLayout;
        this.conv = new Tensor[layers.size()][capacity + 1];
        this.ssm = new Tensor[layers.size()][capacity + 1];
        for (int l = 0; l < layers.size(); l++) {
            RecurrentShape s = layers.get(l);
            for (int slot = 0; slot <= capacity; slot++) {
                conv[l][slot] = backend.zeros(s.convDim(), s.window());
                ssm[l][slot] = backend.zeros(s.heads(), s.keyDim(), s.valueDim());
            }
        }
        this.layout = new StateLayout[capacity + 1];
        this.refCount = new int[capacity + 1];
        this.workspaces = new java.util.ArrayList<>();
        for (int slot = 0; slot <= capacity; slot++) {
            layout[slot] = allocLayout;
            if (slot < capacity) {
                free.add(slot);
            }
            workspaces.add(new HashMap<>());
        }
        refCount[capacity] = 1;   // the padding slot: always held, never in the free list
    }

    /**
     * The slot padding rows use: held by the pool itself, never returned by {@link #alloc}, never
     * copied from. Its contents are garbage by design; nothing reads them into a real slot.
     */
    public int paddingSlot() {
        return capacity;
    }

    public Backend backend() {
        return backend;
    }

    public List<RecurrentShape> layers() {
        return layers;
    }

    public int numLayers() {
        return layers.size();
    }

    public int capacity() {
        return capacity;
    }

    public int freeSlots() {
        return free.size();
    }

    public int usedSlots() {
        return capacity - free.size();
    }

    /** The layout a freshly allocated slot is in. */
    public StateLayout allocLayout() {
        return allocLayout;
    }

    /** How many slot conversions {@link #ensureLayout} has performed. */
    public long conversions() {
        return conversions;
    }

    /** Bytes of conv and SSM state over all slots (float32), plus the strategies' buffers. */
    public long bytes() {
        long perSlot = 0;
        for (RecurrentShape s : layers) {
            perSlot += 4 * (s.stateElements() + s.convElements());
        }
        long total = perSlot * (capacity + 1);
        for (Map<String, SlotWorkspace> m : workspaces) {
            for (SlotWorkspace w : m.values()) {
                total += w.bytes();
            }
        }
        return total;
    }

    /** A zeroed slot in the allocation layout, held once, or -1 when the pool is full. */
    public int alloc() {
        Integer slot = free.poll();
        if (slot == null) {
            return -1;
        }
        for (int l = 0; l < layers.size(); l++) {
            backend.zero(conv[l][slot]);
            backend.zero(ssm[l][slot]);
        }
        layout[slot] = allocLayout;
        for (SlotWorkspace w : workspaces.get(slot).values()) {
            w.reset();
        }
        refCount[slot] = 1;
        return slot;
    }

    /** A new slot holding a copy of {@code src} (data and layout), or -1 when the pool is full. */
    public int fork(int src) {
        requireHeld(src);
        requireSettled(src);   // before alloc: a refused fork must not leak the slot it took
        int dst = alloc();
        if (dst >= 0) {
            copy(src, dst);
        }
        return dst;
    }

    /**
     * Copies the committed state of {@code src} into {@code dst}, layout flag included. The source
     * must be settled: a slot whose strategy still owes work ({@link SlotWorkspace#pending}) does not
     * hold {@code S(L)} and copying it would spread a stale state. The destination's strategy
     * buffers are reset: work it still owed belonged to the state the copy overwrites.
     */
    public void copy(int src, int dst) {
        requireHeld(src);
        requireHeld(dst);
        if (src == capacity || dst == capacity) {
            throw new IllegalStateException("the padding slot is never copied from or into");
        }
        requireSettled(src);
        for (int l = 0; l < layers.size(); l++) {
            backend.copy(conv[l][src], conv[l][dst]);
            backend.copy(ssm[l][src], ssm[l][dst]);
        }
        layout[dst] = layout[src];
        // dst now holds src's settled S(L): whatever its strategies still owed belongs to the old data
        for (SlotWorkspace w : workspaces.get(dst).values()) {
            w.reset();
        }
    }

    public void retain(int slot) {
        requireHeld(slot);
        refCount[slot]++;
    }

    /** Drops one holder; the slot is free again after the last. */
    public void release(int slot) {
        requireHeld(slot);
        if (slot == capacity) {
            throw new IllegalStateException("the padding slot is never released");
        }
        if (--refCount[slot] == 0) {
            free.add(slot);
        }
    }

    public int refCount(int slot) {
        return refCount[slot];
    }

    public StateLayout layout(int slot) {
        return layout[slot];
    }

    /** Converts every state of {@code slot} to {@code wanted} unless it is already in it. */
    public void ensureLayout(int slot, StateLayout wanted) {
        requireHeld(slot);
        if (layout[slot] == wanted) {
            return;
        }
        for (int l = 0; l < layers.size(); l++) {
            RecurrentShape s = layers.get(l);
            if (layout[slot] == StateLayout.KV) {
                backend.transposeState(ssm[l][slot], s.heads(), s.keyDim(), s.valueDim());
            } else {
                backend.transposeState(ssm[l][slot], s.heads(), s.valueDim(), s.keyDim());
            }
        }
        layout[slot] = wanted;
        conversions++;
    }

    /** Sets the layout flag of a slot a strategy has just written a state into (a snapshot). */
    void setLayout(int slot, StateLayout value) {
        requireHeld(slot);
        layout[slot] = value;
    }

    /** Layer {@code layer}'s conv window of {@code slot}, {@code [convDim, W−1]}. */
    public Tensor conv(int layer, int slot) {
        return conv[layer][slot];
    }

    /** Layer {@code layer}'s state of {@code slot}, in the slot's layout. */
    public Tensor ssm(int layer, int slot) {
        return ssm[layer][slot];
    }

    /** The workspace {@code key} of {@code slot}, made by {@code create} the first time it is asked for. */
    @SuppressWarnings("unchecked")
    public <W extends SlotWorkspace> W workspace(int slot, String key, Supplier<W> create) {
        requireHeld(slot);
        return (W) workspaces.get(slot).computeIfAbsent(key, k -> create.get());
    }

    /** The workspace {@code key} of {@code slot} if one was made, else null. */
    @SuppressWarnings("unchecked")
    public <W extends SlotWorkspace> W workspaceIfPresent(int slot, String key) {
        return (W) workspaces.get(slot).get(key);
    }

    private void requireSettled(int src) {
        for (SlotWorkspace w : workspaces.get(src).values()) {
            if (w.pending()) {
                throw new IllegalStateException("slot " + src + " has pending rollback work; settle it before copying");
            }
        }
    }

    private void requireHeld(int slot) {
        if (slot < 0 || slot > capacity || refCount[slot] <= 0) {
            throw new IllegalStateException("slot " + slot + " is not allocated");
        }
    }

    @Override
    public void close() {
        for (int l = 0; l < layers.size(); l++) {
            for (int slot = 0; slot <= capacity; slot++) {
                backend.free(conv[l][slot]);
                backend.free(ssm[l][slot]);
            }
        }
        for (Map<String, SlotWorkspace> m : workspaces) {
            m.values().forEach(SlotWorkspace::free);
        }
    }
}
