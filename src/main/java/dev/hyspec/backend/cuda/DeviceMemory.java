package dev.hyspec.backend.cuda;

import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;

import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.TreeMap;
import jcuda.driver.CUdeviceptr;

/**
 * Device memory with every byte accounted for: blocks are rounded up to {@value #ALIGN} bytes and
 * freed blocks are kept per size for reuse (work runs in order on one stream, so a block may be
 * handed out again as soon as it is released). Reuse is deterministic — the oldest free block of a
 * size goes first — so a step that allocates the same sizes in the same order gets the same
 * addresses, which is what lets a captured graph be replayed. {@link #close()} returns everything
 * to the driver.
 */
final class DeviceMemory implements AutoCloseable {
    static final long ALIGN = 256;

    /** A block from the driver; {@code live} while handed out, else parked in {@link #cached}. */
    private static final class Block {
        final CUdeviceptr ptr;
        final long serial;
        final long size;
        boolean live;

        Block(CUdeviceptr ptr, long serial, long size) {
            this.ptr = ptr;
            this.serial = serial;
            this.size = size;
        }
    }

    private final Map<Long, TreeMap<Long, Block>> cached = new HashMap<>();   // per size, by serial
    private final Map<CUdeviceptr, Block> known = new IdentityHashMap<>();
    private long serials;
    private long liveBytes;
    private long liveBlocks;
    private Runnable beforeTrim = () -> {};
    private HostProfile hostProfile;   // null unless a host profile is on

    static long rounded(long bytes) {
        return Math.max(ALIGN, (bytes + ALIGN - 1) / ALIGN * ALIGN);
    }

    /** A block of at least {@code bytes} bytes; its size as accounted is {@link #rounded}. */
    CUdeviceptr alloc(long bytes) {
        if (hostProfile == null) {
            return allocBlock(bytes);
        }
        long t0 = System.nanoTime();
        CUdeviceptr p = allocBlock(bytes);
        hostProfile.memory(System.nanoTime() - t0);
        return p;
    }

    private CUdeviceptr allocBlock(long bytes) {
        long size = rounded(bytes);
        TreeMap<Long, Block> free = cached.get(size);
        Block b;
        if (free != null && !free.isEmpty()) {
            b = free.pollFirstEntry().getValue();
        } else {
            CUdeviceptr p = new CUdeviceptr();
            try {
                cuMemAlloc(p, size);
            } catch (RuntimeException e) {
                // Out of memory with blocks parked in the cache: give them back and try once more.
                trim();
                cuMemAlloc(p, size);
            }
            b = new Block(p, serials++, size);
            known.put(p, b);
        }
        b.live = true;
        liveBytes += size;
        liveBlocks++;
        return b.ptr;
    }

    /** Returns a block for reuse. */
    void release(CUdeviceptr p) {
        if (hostProfile == null) {
            releaseBlock(p);
            return;
        }
        long t0 = System.nanoTime();
        releaseBlock(p);
        hostProfile.memory(System.nanoTime() - t0);
    }

    private void releaseBlock(CUdeviceptr p) {
        Block b = known.get(p);
        if (b == null || !b.live) {
            throw new IllegalStateException("device block released twice or never allocated here");
        }
        b.live = false;
        liveBytes -= b.size;
        liveBlocks--;
        cached.computeIfAbsent(b.size, k -> new TreeMap<>()).put(b.serial, b);
    }

    /** Frees every cached block back to the driver. */
    void trim() {
        if (!cached.isEmpty()) {
            beforeTrim.run();
        }
        for (TreeMap<Long, Block> q : cached.values()) {
            for (Block b : q.values()) {
                cuMemFree(b.ptr);
                known.remove(b.ptr);
            }
        }
        cached.clear();
    }

    void hostProfile(HostProfile profile) {
        hostProfile = profile;
    }

    long liveBytes() {
        return liveBytes;
    }

    long liveBlocks() {
        return liveBlocks;
    }

    /**
     * Runs before cached blocks go back to the driver: the runtime issues and waits for any queued
     * work there, since queued work may still use a block that was released into the cache.
     */
    void beforeTrim(Runnable hook) {
        this.beforeTrim = hook;
    }

    /** Frees every block, live or cached (weights and pools included: the backend is closing). */
    @Override
    public void close() {
        trim();
        for (Block b : known.values()) {
            cuMemFree(b.ptr);   // after trim, every known block is live
        }
        known.clear();
        liveBytes = 0;
        liveBlocks = 0;
    }
}
