package dev.hyspec.backend.cuda;

import static jcuda.driver.JCudaDriver.cuGraphDestroy;
import static jcuda.driver.JCudaDriver.cuGraphExecDestroy;
import static jcuda.driver.JCudaDriver.cuGraphInstantiate;
import static jcuda.driver.JCudaDriver.cuGraphLaunch;
import static jcuda.driver.JCudaDriver.cuStreamBeginCapture;
import static jcuda.driver.JCudaDriver.cuStreamEndCapture;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import jcuda.NativePointerObject;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUstream;
import jcuda.driver.CUstreamCaptureMode;

/**
 * Decode and verify steps as CUDA graphs. While a step is recorded, the runtime queues its work
 * (kernels, device copies, memsets, and the copies of staged host arrays out of pinned memory)
 * instead of issuing it, and writes the step's signature: every kernel with its launch shape and
 * argument values (device addresses included), every copy with its addresses. At the end of the
 * step, a signature seen before replays its captured graph — the staged host arrays (token ids,
 * positions, block tables, counts) are read from the same pinned addresses, now holding this step's
 * values — a signature seen for the second time is captured, and a first one is issued as is.
 * Allocation is deterministic ({@link DeviceMemory}), so the same batch composition gives the
 * same addresses step after step. A step that needs the host mid-way (a download, say, for MoE
 * routing) gives up its recording: the queued work is issued eagerly and the step goes on without one.
 */
final class StepGraphs implements AutoCloseable {
    /** Graphs kept (one per piece of a step), least recently used evicted first. */
    private static final int CAPACITY = 256;
    private static final Field NATIVE_POINTER = field(NativePointerObject.class, "nativePointer");
    private static final Field BYTE_OFFSET = field(Pointer.class, "byteOffset");

    /** One queued piece of work. */
    interface Op {
        void issue(CUstream stream);
    }

    private record Key(long[] signature, int hash) {
        Key(long[] signature) {
            this(signature, Arrays.hashCode(signature));
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.hash == hash && Arrays.equals(k.signature, signature);
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    private final CUstream stream;
    private final Map<Key, CUgraphExec> graphs = new LinkedHashMap<>(16, 0.75f, true);
    private final Map<Key, Boolean> seen = new HashMap<>();
    private List<Op> ops;
    private final List<String> labels = new ArrayList<>();   // per queued op, for a profile
    private final List<Long> opBytes = new ArrayList<>();    // per queued op: weight bytes it reads, or 0
    private StepProfile profile;
    private long beganNanos;   // when the step's recording began (for a profile)
    private Op stagingCopy;   // the piece's staged host arrays, one copy issued ahead of its other ops
    private int stagedFrom;
    private int stagedBytes;
    private long[] sig = new long[1024];
    private int sigLength;
    private long captured;
    private long replayed;
    private long eager;
    private long abandoned;

    StepGraphs(CUstream stream) {
        this.stream = stream;
    }

    boolean recording() {
        return ops != null;
    }

    /** Ops queued so far in the step being recorded (0 when none is). */
    int queuedOps() {
        return ops == null ? 0 : ops.size();
    }

    void begin() {
        ops = new ArrayList<>();
        labels.clear();
        opBytes.clear();
        sigLength = 0;
        stagingCopy = null;
        stagedFrom = 0;
        stagedBytes = 0;
        beganNanos = System.nanoTime();
    }

    /**
     * The piece's staged host arrays now fill bytes {@code from} .. {@code from + bytes} of the staging
     * area; {@code copy} copies them to the device. One copy ahead of the piece's other ops replaces a
     * copy per array (every staged array is written on the host before the piece's work is issued).
     */
    void staged(int from, int bytes, Op copy) {
        stagedFrom = from;
        stagedBytes = bytes;
        stagingCopy = copy;
    }

    /** Stops recording and returns the queued ops, the staging copy first. */
    private List<Op> take() {
        List<Op> queued = ops;
        ops = null;
        if (stagingCopy != null) {
            queued.add(0, stagingCopy);
            labels.add(0, "memcpy staged host-to-device");
            opBytes.add(0, 0L);
            add(null, 0, null, 4, stagedFrom, stagedBytes);   // into the signature (ops is null: nothing is queued)
            stagingCopy = null;
        }
        return queued;
    }

    /** While set, every recorded step is profiled ({@link StepProfile}) instead of replayed or captured. */
    void profile(StepProfile profile) {
        this.profile = profile;
    }

    boolean profiling() {
        return profile != null;
    }

    /**
     * Queues an op; {@code signature} are the values that identify it (addresses, shapes, scalars).
     * {@code label} and {@code bytes} (weight bytes it streams, 0 if none) name it in a profile.
     */
    void add(String label, long bytes, Op op, long... signature) {
        if (ops != null) {
            ops.add(op);
            labels.add(label);
            opBytes.add(bytes);
        }
        if (sigLength + signature.length + 1 > sig.length) {
            sig = Arrays.copyOf(sig, Math.max(sig.length * 2, sigLength + signature.length + 1));
        }
        sig[sigLength++] = signature.length;
        System.arraycopy(signature, 0, sig, sigLength, signature.length);
        sigLength += signature.length;
    }

    /**
     * Queues a kernel launch: its signature is {@code 1, kernelId, grid, block, sharedBytes} and the
     * arguments' values ({@link CUdeviceptr} addresses, {@link Integer}, {@link Float} bits, {@link Long}),
     * written straight into the step's signature.
     */
    void addLaunch(String label, long bytes, Op op, int kernelId, int gridX, int gridY, int gridZ, int blockX,
                   int sharedBytes, Object[] args) {
        if (ops != null) {
            ops.add(op);
            labels.add(label);
            opBytes.add(bytes);
        }
        int length = 7 + args.length;
        if (sigLength + length + 1 > sig.length) {
            sig = Arrays.copyOf(sig, Math.max(sig.length * 2, sigLength + length + 1));
        }
        long[] s = sig;
        int at = sigLength;
        s[at++] = length;
        s[at++] = 1;
        s[at++] = kernelId;
        s[at++] = gridX;
        s[at++] = gridY;
        s[at++] = gridZ;
        s[at++] = blockX;
        s[at++] = sharedBytes;
        for (Object a : args) {
            s[at++] = a instanceof CUdeviceptr p ? address(p)
                    : a instanceof Integer v ? v
                    : a instanceof Float v ? Float.floatToRawIntBits(v)
                    : (Long) a;
        }
        sigLength = at;
    }

    /** Issues what was queued, eagerly, and stops recording (a host synchronisation came mid-step). */
    void abandon() {
        if (ops == null) {
            return;
        }
        List<Op> queued = take();
        abandoned++;
        for (Op op : queued) {
            op.issue(stream);
        }
    }

    /** Ends the step: replays, captures or issues the work recorded since it began (or since its last cut). */
    void end() {
        if (ops == null) {
            return;
        }
        flush(take());
    }

    /**
     * Cuts the step being recorded: the work recorded so far starts on the device (replayed, captured
     * or issued as {@link #end()} would) while the rest of the step is recorded as a piece of its own.
     * Each piece has its own signature and graph, so a step of P pieces replays P graphs; the host
     * records piece k + 1 while the device runs piece k. A profiled step is not cut.
     */
    void cut() {
        if (ops == null || profile != null) {
            return;
        }
        List<Op> queued = take();
        flush(queued);
        begin();
    }

    private void flush(List<Op> queued) {
        if (queued.isEmpty()) {
            return;
        }
        if (profile != null) {
            profile.recorded(System.nanoTime() - beganNanos);
            profile.step(stream, queued, labels, opBytes);
            return;
        }
        Key key = new Key(Arrays.copyOf(sig, sigLength));
        CUgraphExec exec = graphs.get(key);
        if (exec == null && seen.remove(key) != null) {
            exec = capture(stream, queued);
            graphs.put(key, exec);
            captured++;
            if (graphs.size() > CAPACITY) {
                Map.Entry<Key, CUgraphExec> eldest = graphs.entrySet().iterator().next();
                cuGraphExecDestroy(eldest.getValue());
                graphs.remove(eldest.getKey());
            }
        } else if (exec != null) {
            replayed++;
        }
        if (exec != null) {
            cuGraphLaunch(exec, stream);
            return;
        }
        if (seen.size() > 4 * CAPACITY) {
            seen.clear();
        }
        seen.put(key, Boolean.TRUE);
        eager++;
        for (Op op : queued) {
            op.issue(stream);
        }
    }

    /** Captures {@code queued}, issued in order on {@code stream}, as an instantiated graph. */
    static CUgraphExec capture(CUstream stream, List<Op> queued) {
        cuStreamBeginCapture(stream, CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED);
        try {
            for (Op op : queued) {
                op.issue(stream);
            }
        } finally {
            CUgraph graph = new CUgraph();
            cuStreamEndCapture(stream, graph);
            try {
                CUgraphExec exec = new CUgraphExec();
                cuGraphInstantiate(exec, graph, 0);
                return exec;
            } finally {
                cuGraphDestroy(graph);
            }
        }
    }

    /** The device or host address a JCuda pointer refers to (for signatures). */
    static long address(Pointer p) {
        try {
            return NATIVE_POINTER.getLong(p) + BYTE_OFFSET.getLong(p);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Field field(Class<?> c, String name) {
        try {
            Field f = c.getDeclaredField(name);
            f.setAccessible(true);
            return f;
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    long captured() {
        return captured;
    }

    long replayed() {
        return replayed;
    }

    long eager() {
        return eager;
    }

    long abandoned() {
        return abandoned;
    }

    @Override
    public void close() {
        for (CUgraphExec exec : graphs.values()) {
            cuGraphExecDestroy(exec);
        }
        graphs.clear();
        seen.clear();
    }
}
