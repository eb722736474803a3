package dev.hyspec.backend.cuda;

import static jcuda.driver.JCudaDriver.cuMemAlloc;
import static jcuda.driver.JCudaDriver.cuMemFree;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import jcuda.driver.CUdeviceptr;

/**
 * Device memory with every byte accounted for: blocks are rounded up to {@value #ALIGN} bytes and
 * freed blocks are kept per size for reuse (work runs in order on one stream, so a block may be
 * handed out again as soon as it is released). {@link #close()} returns everything to the driver.
 */
final class DeviceMemory implements AutoCloseable {
    static final long ALIGN = 256;

    private final Map<Long, ArrayDeque<CUdeviceptr>> cached = new HashMap<>();
    private final Map<CUdeviceptr, Long> live = new IdentityHashMap<>();
    private long liveBytes;
    private long liveBlocks;
    private long cachedBytes;
    private long peakBytes;

    static long rounded(long bytes) {
        return Math.max(ALIGN, (bytes + ALIGN - 1) / ALIGN * ALIGN);
    }

    /** A block of at least {@code bytes} bytes; its size as accounted is {@link #rounded}. */
    CUdeviceptr alloc(long bytes) {
        long size = rounded(bytes);
        ArrayDeque<CUdeviceptr> free = cached.get(size);
        CUdeviceptr p = free == null ? null : free.pollLast();
        if (p != null) {
            cachedBytes -= size;
        } else {
            p = new CUdeviceptr();
            try {
                cuMemAlloc(p, size);
            } catch (RuntimeException e) {
                // Out of memory with blocks parked in the cache: give them back and try once more.
                trim();
                cuMemAlloc(p, size);
            }
        }
        live.put(p, size);
        liveBytes += size;
        liveBlocks++;
        peakBytes = Math.max(peakBytes, liveBytes);
        return p;
    }

    /** Returns a block of {@code bytes} (as passed to {@link #alloc}) for reuse. */
    void release(CUdeviceptr p, long bytes) {
        long size = rounded(bytes);
        if (live.remove(p) == null) {
            throw new IllegalStateException("device block released twice or never allocated here");
        }
        liveBytes -= size;
        liveBlocks--;
        cachedBytes += size;
        cached.computeIfAbsent(size, k -> new ArrayDeque<>()).addLast(p);
    }

    /** Frees every cached block back to the driver. */
    void trim() {
        for (ArrayDeque<CUdeviceptr> q : cached.values()) {
            for (CUdeviceptr p : q) {
                cuMemFree(p);
            }
        }
        cached.clear();
        cachedBytes = 0;
    }

    long liveBytes() {
        return liveBytes;
    }

    long liveBlocks() {
        return liveBlocks;
    }

    long cachedBytes() {
        return cachedBytes;
    }

    long peakBytes() {
        return peakBytes;
    }

    /** Frees every block, live or cached; returns how many were still live (tensors not freed). */
    @Override
    public void close() {
        trim();
        long leaked = live.size();
        for (CUdeviceptr p : live.keySet()) {
            cuMemFree(p);
        }
        live.clear();
        liveBytes = 0;
        liveBlocks = 0;
        lastLeaked = leaked;
    }

    private long lastLeaked;

    /** How many blocks {@link #close()} found still live. */
    long leakedAtClose() {
        return lastLeaked;
    }
}
